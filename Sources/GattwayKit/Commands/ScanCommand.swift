import BlueZ
import Bluetooth
import JSON
import Parsers

/// `gattway scan`: a live table of nearby devices (address, name, RSSI, services, decoded
/// advertisement) on a terminal, JSON lines otherwise or with `--json`.
struct ScanCommand: Command {
    static let name = "scan"
    static let summary = "Scan for BLE devices: a live table on a terminal, JSON lines otherwise."
    static let discussion = """
        Scans continuously with BlueZ (the system bus, $DBUS_SYSTEM_BUS_ADDRESS) until --duration passes or \
        SIGINT. On a terminal the table is redrawn twice a second; otherwise (or with --json) each discovery is \
        one JSON line {"address", "name", "rssi", "tx_power", "services", "manufacturer_data", "service_data", \
        "decoded"}. Advertisements a built-in parser knows are decoded (BTHome, Ruuvi, ATC/pvvx, …).
        """
    static let options: [Option] =
        [
            Option(
                name: "services",
                help: "Only devices advertising one of these service UUIDs (comma-separated, repeatable).",
                valueName: "UUIDS", repeatable: true),
            .value("duration", "DURATION", "Stop after this long (e.g. 10s).", default: "until SIGINT"),
            .value("rssi", "DBM", "Ignore devices weaker than this RSSI."),
            .flag("json", "Print JSON lines even on a terminal."),
            .flag("duplicates", "JSON lines for every advertisement report, not only for changes."),
        ] + CentralSession.options

    let services: [BluetoothUUID]?
    let duration: Double?
    let rssi: Int16?
    let json: Bool
    let duplicates: Bool
    let adapter: String?
    let timeout: Double

    init(parsing arguments: ParsedArguments) throws {
        var uuids: [BluetoothUUID] = []
        for text in arguments.allValues("services").flatMap({ $0.split(separator: ",") }) {
            guard let uuid = BluetoothUUID(text.trimmingWhitespace()) else {
                throw CLIError.usage("--services: \"\(text)\" is not a UUID (e.g. 180F)")
            }
            uuids.append(uuid)
        }
        services = uuids.isEmpty ? nil : uuids
        duration = try arguments.duration("duration")
        if let text = arguments.value("rssi") {
            guard let value = Int16(text), (-127...20).contains(value) else {
                throw CLIError.usage("--rssi: expected -127…20 dBm")
            }
            rssi = value
        } else {
            rssi = nil
        }
        json = arguments.flag("json") || !standardOutputIsTerminal
        duplicates = arguments.flag("duplicates")
        adapter = arguments.value("adapter")
        timeout = try CentralSession.timeout(arguments)
    }

    func run() async throws -> ExitCode {
        let session = try await CentralSession.start(adapter: adapter, timeout: timeout)
        let results: AsyncStream<ScanResult>
        do {
            results = try await session.central.scan(
                ScanOptions(services: services, allowDuplicates: duplicates || !json, rssiThreshold: rssi))
        } catch {
            await session.close()
            throw CLIError.failure("\(error)")
        }
        let json = self.json
        let width = json ? 0 : ScanTable.terminalWidth()
        let consumer = Task {
            var table = ScanTable()
            var lastDraw = ContinuousClock.now - .seconds(1)
            for await result in results {
                if json {
                    standardOutput(ScanTable.jsonLine(result) + "\n")
                } else {
                    table.update(result)
                    if ContinuousClock.now - lastDraw >= .milliseconds(500) {
                        standardOutput(table.render(width: width))
                        lastDraw = .now
                    }
                }
            }
        }
        if let duration {
            try? await Task.sleep(for: .nanoseconds(Int64(saturating: duration * 1e9)))
        } else {
            _ = await SignalSources.waitForTermination()
        }
        consumer.cancel()
        await session.close()
        return .success
    }
}
