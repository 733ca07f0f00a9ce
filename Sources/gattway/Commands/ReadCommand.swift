import BlueZ
import Bluetooth
import JSON
import Parsers

/// `gattway read ADDRESS CHARACTERISTIC`: connects, reads one value, prints it.
struct ReadCommand: Command {
    static let name = "read"
    static let summary = "Read a characteristic and print its value (hex, decoded when a parser knows it)."
    static let positionals = CharacteristicTarget.positionals
    static let options: [Option] = [.flag("json", "Print a JSON object.")] + CentralSession.options

    let target: CharacteristicTarget
    let json: Bool

    init(parsing arguments: ParsedArguments) throws {
        target = try CharacteristicTarget(parsing: arguments)
        json = arguments.flag("json")
    }

    func run() async throws -> ExitCode {
        try await self.target.withCharacteristic { session, target in
            let value = try await session.central.readValue(for: target)
            let readings = (try? ParserRegistry.builtIn.decode(characteristic: target.uuid, value: value)) ?? []
            if json {
                standardOutput(
                    JSONValue.object([
                        (key: "address", value: .string(self.target.address.description)),
                        (key: "characteristic", value: .string(target.uuid.shortDescription)),
                        (key: "hex", value: .string(Hex.encode(value))),
                        (
                            key: "readings",
                            value: .object(readings.map { (key: $0.name, value: ScanTable.json($0.value)) })
                        ),
                    ]).serialized + "\n")
            } else {
                let decoded = readings.map { "\($0.name)=\(ScanTable.text($0.value))\($0.unit ?? "")" }.joined(
                    separator: " ")
                standardOutput(Hex.encode(value, separator: " ") + (decoded.isEmpty ? "" : "  (\(decoded))") + "\n")
            }
        }
        return .success
    }
}
