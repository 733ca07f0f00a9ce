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
            standardOutput(
                CharacteristicTarget.valueLine(value, of: target.uuid, address: self.target.device.address, json: json))
        }
        return .success
    }
}
