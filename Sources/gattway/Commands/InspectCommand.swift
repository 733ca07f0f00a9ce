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

    let address: BluetoothAddress
    let json: Bool
    let adapter: String?
    let timeout: Double

    init(parsing arguments: ParsedArguments) throws {
        address = try CentralSession.address(arguments.positional("address"))
        json = arguments.flag("json")
        adapter = arguments.value("adapter")
        timeout = try CentralSession.timeout(arguments)
    }

    func run() async throws -> ExitCode {
        let session = try await CentralSession.start(adapter: adapter, timeout: timeout)
        let central = session.central
        do {
            let peripheral = try await session.connect(address, timeout: timeout)
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
                            if let readings = try? ParserRegistry.builtIn.decode(
                                characteristic: characteristic.uuid, value: value)
                            {
                                line +=
                                    " ("
                                    + readings.map { "\($0.name)=\(ScanTable.text($0.value))\($0.unit ?? "")" }.joined(
                                        separator: " ") + ")"
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
                        (key: "address", value: .string(address.description)),
                        (key: "name", value: snapshot.name.map { .string($0) } ?? .null),
                        (key: "services", value: .array(services)),
                    ]).serialized + "\n")
            } else {
                standardOutput(text)
            }
            try? await central.disconnect(peripheral)
        } catch {
            await session.close()
            if let error = error as? CLIError { throw error }
            throw CLIError.failure("\(error)")
        }
        await session.close()
        return .success
    }

    static func name(_ uuid: BluetoothUUID) -> String {
        uuid.name.map { "\(uuid.shortDescription) (\($0))" } ?? uuid.shortDescription
    }
}
