import BlueZ
import Bluetooth

/// `gattway write ADDRESS CHARACTERISTIC VALUE`: connects and writes one value.
struct WriteCommand: Command {
    static let name = "write"
    static let summary = "Write a value (hex, or text with --utf8) to a characteristic."
    static let positionals =
        CharacteristicTarget.positionals + [
            Positional(name: "value", help: "Bytes in hex (01ff, \"01 ff\"), or text with --utf8.")
        ]
    static let options: [Option] =
        [
            .flag("without-response", "Write without response (ATT Write Command)."),
            .flag("utf8", "VALUE is text, written as UTF-8."),
        ] + CentralSession.options

    let target: CharacteristicTarget
    let value: [UInt8]
    let type: WriteType

    init(parsing arguments: ParsedArguments) throws {
        target = try CharacteristicTarget(parsing: arguments)
        let text = arguments.positional("value") ?? ""
        if arguments.flag("utf8") {
            value = Array(text.utf8)
        } else {
            guard let bytes = Hex.decode(text, separators: " ,:-", prefixes: true) else {
                throw CLIError.usage("\"\(text)\" is not hex bytes (e.g. 01ff); use --utf8 for text")
            }
            value = bytes
        }
        type = arguments.flag("without-response") ? .withoutResponse : .withResponse
    }

    func run() async throws -> ExitCode {
        try await self.target.withCharacteristic { session, target in
            try await session.central.writeValue(value, for: target, type: type)
            standardOutput(
                "wrote \(value.count) byte(s) to \(target.uuid.shortDescription) \(type == .withResponse ? "with" : "without") response\n"
            )
        }
        return .success
    }
}
