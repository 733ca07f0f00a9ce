import FoundationEssentials
import BlueZ
import Bluetooth
import JSON
import Parsers

/// `gattway read ADDRESS CHARACTERISTIC`: connects, reads one value, prints it.
struct ReadCommand: Command {
    static let name = "read"
    static let summary = "Read a characteristic and print its value (hex, decoded when a parser knows it)."
    static let positionals = [
        Positional(name: "address", help: "Device address."),
        Positional(name: "characteristic", help: "Characteristic UUID, or SERVICE/CHARACTERISTIC."),
    ]
    static let options: [Option] = [.flag("json", "Print a JSON object.")] + CentralSession.options

    let address: BluetoothAddress
    let characteristic: String
    let json: Bool
    let adapter: String?
    let timeout: Double

    init(parsing arguments: ParsedArguments) throws {
        address = try CentralSession.address(arguments.positional("address"))
        characteristic = arguments.positional("characteristic") ?? ""
        json = arguments.flag("json")
        adapter = arguments.value("adapter")
        timeout = try CentralSession.timeout(arguments)
    }

    func run() async throws -> ExitCode {
        try await CentralSession.withConnection(address, adapter: adapter, timeout: timeout) { session, peripheral in
            let target = try await session.characteristic(characteristic, on: peripheral)
            let value = try await session.central.readValue(for: target)
            let readings = (try? ParserRegistry.builtIn.decode(characteristic: target.uuid, value: value)) ?? []
            if json {
                standardOutput(JSONValue.object([
                    (key: "address", value: .string(address.description)),
                    (key: "characteristic", value: .string(target.uuid.shortDescription)),
                    (key: "hex", value: .string(hexString(value).replacing(" ", with: ""))),
                    (key: "readings", value: .object(readings.map { (key: $0.name, value: ScanTable.json($0.value)) })),
                ]).serialized + "\n")
            } else {
                let decoded = readings.map { "\($0.name)=\(ScanTable.text($0.value))\($0.unit ?? "")" }.joined(separator: " ")
                standardOutput(hexString(value) + (decoded.isEmpty ? "" : "  (\(decoded))") + "\n")
            }
        }
        return .success
    }
}
