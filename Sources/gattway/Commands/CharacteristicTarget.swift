import BlueZ
import Bluetooth

/// `ADDRESS CHARACTERISTIC [--adapter] [--timeout]`, the target of `read`, `write` and `notify`:
/// parsed once, then connected to with ``withCharacteristic(_:)``.
struct CharacteristicTarget {
    static let positionals = [
        Positional(name: "address", help: "Device address."),
        Positional(name: "characteristic", help: "Characteristic UUID, or SERVICE/CHARACTERISTIC."),
    ]

    let address: BluetoothAddress
    let characteristic: String
    let adapter: String?
    let timeout: Double

    init(parsing arguments: ParsedArguments) throws {
        address = try CentralSession.address(arguments.positional("address"))
        characteristic = arguments.positional("characteristic") ?? ""
        adapter = arguments.value("adapter")
        timeout = try CentralSession.timeout(arguments)
    }

    /// Connects, finds the characteristic, runs `body`, disconnects (see
    /// ``CentralSession/withConnection(_:adapter:timeout:_:)``).
    func withCharacteristic(_ body: (CentralSession, Characteristic) async throws -> Void) async throws {
        try await CentralSession.withConnection(address, adapter: adapter, timeout: timeout) { session, peripheral in
            try await body(session, try await session.characteristic(characteristic, on: peripheral))
        }
    }
}
