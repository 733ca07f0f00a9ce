import BlueZ
import Bluetooth
import JSON
import Parsers

/// `gattway notify ADDRESS CHARACTERISTIC`: subscribes and prints each notification.
struct NotifyCommand: Command {
    static let name = "notify"
    static let summary = "Subscribe to a characteristic and print each notification or indication."
    static let positionals = CharacteristicTarget.positionals
    static let options: [Option] =
        [
            .value("count", "N", "Stop after N values.", default: "unlimited"),
            .value("duration", "DURATION", "Stop after this long.", default: "until SIGINT"),
            .flag("json", "Print JSON lines."),
        ] + CentralSession.options

    let target: CharacteristicTarget
    let count: Int?
    let duration: Double?
    let json: Bool

    init(parsing arguments: ParsedArguments) throws {
        target = try CharacteristicTarget(parsing: arguments)
        if let text = arguments.value("count") {
            guard let number = Int(text), number > 0 else {
                throw CLIError.usage("--count: expected a positive number")
            }
            count = number
        } else {
            count = nil
        }
        duration = try arguments.duration("duration")
        json = arguments.flag("json")
    }

    func run() async throws -> ExitCode {
        try await self.target.withCharacteristic { session, target in
            let values = try await session.central.notifications(for: target)
            let (count, json, uuid) = (self.count, self.json, target.uuid)
            let printer = Task {
                var received = 0
                for try await value in values {
                    standardOutput(CharacteristicTarget.valueLine(value, of: uuid, json: json))
                    received += 1
                    if let count, received >= count { return }
                }
            }
            let stopper = Task {
                if let duration = self.duration {
                    try? await Task.sleep(for: .nanoseconds(Int64(saturating: duration * 1e9)))
                } else {
                    _ = await SignalSources.waitForTermination()
                }
                printer.cancel()
            }
            try await printer.value
            stopper.cancel()
        }
        return .success
    }
}
