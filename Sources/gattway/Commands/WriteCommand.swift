import BlueZ
import Bluetooth

/// `gattway write ADDRESS CHARACTERISTIC VALUE`: connects and writes one value.
struct WriteCommand: Command {
    static let name = "write"
    static let summary = "Write a value (hex, or text with --utf8) to a characteristic."
    static let positionals = [
        Positional(name: "address", help: "Device address."),
        Positional(name: "characteristic", help: "Characteristic UUID, or SERVICE/CHARACTERISTIC."),
        Positional(name: "value", help: "Bytes in hex (01ff, \"01 ff\"), or text with --utf8."),
    ]
    static let options: [Option] = [
        .flag("without-response", "Write without response (ATT Write Command)."),
        .flag("utf8", "VALUE is text, written as UTF-8."),
    ] + CentralSession.options

    let address: BluetoothAddress
    let characteristic: String
    let value: [UInt8]
    let type: WriteType
    let adapter: String?
    let timeout: Double

    init(parsing arguments: ParsedArguments) throws {
        address = try CentralSession.address(arguments.positional("address"))
        characteristic = arguments.positional("characteristic") ?? ""
        let text = arguments.positional("value") ?? ""
        if arguments.flag("utf8") {
            value = Array(text.utf8)
        } else {
            guard let bytes = parseHex(text) else { throw CLIError.usage("\"\(text)\" is not hex bytes (e.g. 01ff); use --utf8 for text") }
            value = bytes
        }
        type = arguments.flag("without-response") ? .withoutResponse : .withResponse
        adapter = arguments.value("adapter")
        timeout = try CentralSession.timeout(arguments)
    }

    func run() async throws -> ExitCode {
        try await CentralSession.withConnection(address, adapter: adapter, timeout: timeout) { session, peripheral in
            let target = try await session.characteristic(characteristic, on: peripheral)
            try await session.central.writeValue(value, for: target, type: type)
            standardOutput("wrote \(value.count) byte(s) to \(target.uuid.shortDescription) \(type == .withResponse ? "with" : "without") response\n")
        }
        return .success
    }
}
