import BlueZ
import Bluetooth
import JSON
import Parsers

/// `ADDRESS [--adapter] [--timeout]`, the device `inspect`, `read`, `write` and `notify` connect to.
struct DeviceTarget {
    let address: BluetoothAddress
    let adapter: String?
    let timeout: Double

    init(parsing arguments: ParsedArguments) throws {
        address = try CentralSession.address(arguments.positional("address"))
        adapter = arguments.value("adapter")
        timeout = try CentralSession.timeout(arguments)
    }

    /// Connects, runs `body`, disconnects (see ``CentralSession/withConnection(_:adapter:timeout:_:)``).
    func withConnection(_ body: (CentralSession, Peripheral) async throws -> Void) async throws {
        try await CentralSession.withConnection(address, adapter: adapter, timeout: timeout, body)
    }
}

/// `ADDRESS CHARACTERISTIC [--adapter] [--timeout]`, the target of `read`, `write` and `notify`:
/// parsed once, then connected to with ``withCharacteristic(_:)``.
struct CharacteristicTarget {
    static let positionals = [
        Positional(name: "address", help: "Device address."),
        Positional(name: "characteristic", help: "Characteristic UUID, or SERVICE/CHARACTERISTIC."),
    ]

    let device: DeviceTarget
    let characteristic: String

    init(parsing arguments: ParsedArguments) throws {
        device = try DeviceTarget(parsing: arguments)
        characteristic = arguments.positional("characteristic") ?? ""
    }

    /// Connects, finds the characteristic, runs `body`, disconnects (``DeviceTarget/withConnection(_:)``).
    func withCharacteristic(_ body: (CentralSession, Characteristic) async throws -> Void) async throws {
        try await device.withConnection { session, peripheral in
            try await body(session, try await session.characteristic(characteristic, on: peripheral))
        }
    }

    /// A value of `uuid` as `read` and `notify` print it: the hex bytes, then what the active
    /// registry's parser for `uuid` reads in them in parentheses; with `json` an object (led by
    /// `address` when given).
    static func valueLine(_ value: [UInt8], of uuid: BluetoothUUID, address: BluetoothAddress? = nil, json: Bool)
        -> String
    {
        let readings = (try? ParserRegistry.active.decode(characteristic: uuid, value: value)) ?? []
        guard json else {
            let decoded = ScanTable.text(readings)
            return Hex.encode(value, separator: " ") + (decoded.isEmpty ? "" : "  (\(decoded))") + "\n"
        }
        var members: [(key: String, value: JSONValue)] = []
        if let address { members.append((key: "address", value: .string(address.description))) }
        members += [
            (key: "characteristic", value: .string(uuid.shortDescription)),
            (key: "hex", value: .string(Hex.encode(value))),
            (key: "readings", value: ScanTable.json(readings)),
        ]
        return JSONValue.object(members).serialized + "\n"
    }
}
