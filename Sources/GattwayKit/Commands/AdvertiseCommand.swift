import BlueZ
import Bluetooth
import JSON

/// `gattway advertise`: advertises ad hoc (a service UUID with data, a name, a beacon) until
/// SIGINT or `--duration`.
struct AdvertiseCommand: Command {
    static let name = "advertise"
    static let summary = "Advertise a name, service UUIDs and data until SIGINT or --duration."
    static let discussion = """
        Registers one legacy advertisement with BlueZ (LEAdvertisingManager1) on the system bus \
        ($DBUS_SYSTEM_BUS_ADDRESS). It must fit 31 bytes: an oversized one is refused before BlueZ sees it, \
        naming the size of every field. Connectable by default (no GATT services: use `gattway serve` for \
        those); --broadcast makes a non-connectable beacon. Prints when advertising starts, stops and restarts \
        (after a bluetoothd restart or adapter power cycle it is registered again).
        """
    static let options: [Option] =
        PeripheralSession.advertisementOptions + [
            .flag("json", "Print JSON lines.")
        ] + PeripheralSession.options

    let advertisement: Advertisement
    let settings: PeripheralSession.Settings

    init(parsing arguments: ParsedArguments) throws {
        advertisement = try PeripheralSession.checked(PeripheralSession.advertisement(arguments))
        settings = try PeripheralSession.Settings(arguments)
    }

    func run() async throws -> ExitCode {
        let session = try await PeripheralSession.start(settings)
        do {
            try await session.manager.startAdvertising(advertisement)
        } catch {
            await session.close()
            throw CLIError.failure("\(error)")
        }
        let address = await session.manager.adapterAddress.map(\.description) ?? "?"
        let (json, length) = (settings.json, advertisement.legacyPayloadLength)
        standardOutput(
            PeripheralSession.line(
                json: json, "advertising",
                [(key: "address", value: .string(address)), (key: "bytes", value: .number(Double(length)))],
                text: "advertising as \(address) (\(length) of \(Advertisement.legacyLimit) bytes)"))
        await session.run(duration: settings.duration) { event in
            switch event {
            case .advertisingStopped(let reason):
                standardOutput(
                    PeripheralSession.line(
                        json: json, "advertising_stopped", [(key: "reason", value: .string(reason))],
                        text: "advertising stopped: \(reason)"))
            case .advertisingStarted:
                standardOutput(PeripheralSession.line(json: json, "advertising", [], text: "advertising again"))
            case .registrationFailed(let error):
                standardOutput(
                    PeripheralSession.line(
                        json: json, "error", [(key: "error", value: .string("\(error)"))], text: "\(error)"))
            default:
                break
            }
        }
        return .success
    }
}
