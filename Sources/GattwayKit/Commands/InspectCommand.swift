import BlueZ
import Bluetooth
import JSON
import Parsers

/// `gattway inspect ADDRESS`: connects and prints the GATT tree with flags and read values.
struct InspectCommand: Command {
    static let name = "inspect"
    static let summary = "Connect to a device and print its GATT services, characteristics, flags and values."
    static let discussion = """
        Readable characteristics are read and shown as hex, decoded when a built-in parser knows the \
        characteristic; descriptors are listed with their values. Disconnects at the end.
        """
    static let positionals = [Positional(name: "address", help: "Device address, e.g. A4:C1:38:00:00:01.")]
    static let options: [Option] =
        [.flag("json", "Print one JSON object instead of the tree.")] + CentralSession.options

    let device: DeviceTarget
    let json: Bool

    init(parsing arguments: ParsedArguments) throws {
        device = try DeviceTarget(parsing: arguments)
        json = arguments.flag("json")
    }

    func run() async throws -> ExitCode {
        try await device.withConnection { session, peripheral in
            let central = session.central
            let snapshot = await central.peripheral(peripheral.address)
            var text = "\(snapshot)\n"
            var services: [JSONValue] = []
            for service in try await central.discoverServices(for: peripheral) {
                text += "  service \(Self.name(service.uuid))\n"
                var characteristics: [JSONValue] = []
                for characteristic in try await central.discoverCharacteristics(for: service) {
                    var members: [(key: String, value: JSONValue)] = [
                        (key: "uuid", value: .string(characteristic.uuid.shortDescription)),
                        (key: "flags", value: .array(characteristic.properties.bluezFlags.map { .string($0) })),
                    ]
                    var line = "    characteristic \(Self.name(characteristic.uuid)) [\(characteristic.properties)]"
                    if characteristic.properties.contains(.read) {
                        do {
                            let value = try await central.readValue(for: characteristic)
                            line += " = \(Hex.encode(value, separator: " "))"
                            members.append((key: "value", value: .string(Hex.encode(value))))
                            if let readings = try? ParserRegistry.active.decode(
                                characteristic: characteristic.uuid, value: value)
                            {
                                line += " (\(ScanTable.text(readings)))"
                            }
                        } catch let error as CentralError {
                            line += " ! \(error.bluezName ?? error.code.rawValue): \(error.message)"
                            members.append((key: "error", value: .string(error.description)))
                        }
                    }
                    text += line + "\n"
                    for descriptor in try await central.discoverDescriptors(for: characteristic) {
                        var descriptorLine = "      descriptor \(Self.name(descriptor.uuid))"
                        if descriptor.uuid != BluetoothUUID(0x2902),
                            let value = try? await central.readValue(for: descriptor)
                        {
                            descriptorLine += " = \(Hex.encode(value, separator: " "))"
                            if descriptor.uuid == BluetoothUUID(0x2901) {
                                descriptorLine += " \"\(String(decoding: value, as: UTF8.self))\""
                            }
                        }
                        text += descriptorLine + "\n"
                    }
                    characteristics.append(.object(members))
                }
                services.append(
                    .object([
                        (key: "uuid", value: .string(service.uuid.shortDescription)),
                        (key: "characteristics", value: .array(characteristics)),
                    ]))
            }
            if json {
                standardOutput(
                    JSONValue.object([
                        (key: "address", value: .string(device.address.description)),
                        (key: "name", value: snapshot.name.map { .string($0) } ?? .null),
                        (key: "services", value: .array(services)),
                    ]).serialized + "\n")
            } else {
                standardOutput(text)
            }
        }
        return .success
    }

    static func name(_ uuid: BluetoothUUID) -> String {
        uuid.name.map { "\(uuid.shortDescription) (\($0))" } ?? uuid.shortDescription
    }
}
