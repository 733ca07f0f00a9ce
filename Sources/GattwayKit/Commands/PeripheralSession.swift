import BlueZ
import Bluetooth
import EventLoop
import JSON

/// What `gattway advertise` and `gattway serve` share: a loop and a peripheral manager on the
/// system bus that is powered on, the advertisement options, and waiting for the end.
struct PeripheralSession {
    let loop: EventLoop
    let manager: PeripheralManager

    /// Options describing an advertisement (`--name`, `--service`, `--service-data`, …).
    static let advertisementOptions: [Option] = [
        .value("name", "NAME", "Advertise this local name."),
        Option(name: "service", help: "Advertise this service UUID", valueName: "UUID", repeatable: true),
        Option(
            name: "solicit", help: "Solicit this service UUID (ask a central to offer it)", valueName: "UUID",
            repeatable: true),
        Option(
            name: "service-data", help: "Service data as UUID=HEX, e.g. FCD2=40020a", valueName: "UUID=HEX",
            repeatable: true),
        Option(
            name: "manufacturer-data", help: "Manufacturer data as COMPANY=HEX, e.g. 0xffff=0102",
            valueName: "ID=HEX", repeatable: true),
        .value("tx-power", "DBM", "Include the TX power level and ask the controller for this power."),
        .value("appearance", "N", "GAP appearance value, e.g. 0x0340."),
        .flag("broadcast", "Non-connectable (a beacon) instead of a connectable peripheral."),
    ]

    /// `--adapter`, `--timeout` and `--duration`.
    static let options: [Option] = [
        .value("adapter", "NAME|ADDRESS", "Bluetooth adapter (hci0 or its address).", default: "first powered adapter"),
        .value("timeout", "DURATION", "How long to wait for the adapter.", default: "10s"),
        .value("duration", "DURATION", "Stop after this long.", default: "until SIGINT"),
    ]

    /// `--adapter`, `--timeout`, `--duration` and `--json` as parsed.
    struct Settings {
        let adapter: String?
        let timeout: Double
        let duration: Double?
        let json: Bool

        init(_ arguments: ParsedArguments) throws {
            adapter = arguments.value("adapter")
            timeout = try arguments.duration("timeout") ?? 10
            duration = try arguments.duration("duration")
            json = arguments.flag("json")
        }
    }

    /// `advertisement` when it fits the legacy payload, else a usage error naming the sizes (and `hint`).
    static func checked(_ advertisement: Advertisement, hint: String = "") throws -> Advertisement {
        do {
            try advertisement.checkLegacyLength()
        } catch let error as PeripheralError {
            throw CLIError.usage(error.message + hint)
        }
        return advertisement
    }

    /// The advertisement the options describe (with `services` appended to `--service`).
    static func advertisement(_ arguments: ParsedArguments, services: [BluetoothUUID] = []) throws -> Advertisement {
        var advertisement = Advertisement(kind: arguments.flag("broadcast") ? .broadcast : .connectable)
        advertisement.localName = arguments.value("name")
        advertisement.serviceUUIDs = try uuids(arguments, "service", example: "180F")
        for uuid in services where !advertisement.serviceUUIDs.contains(uuid) {
            advertisement.serviceUUIDs.append(uuid)
        }
        advertisement.solicitUUIDs = try uuids(arguments, "solicit", example: "1805")
        for text in arguments.allValues("service-data") {
            let (key, bytes) = try keyAndHex(text, option: "service-data")
            guard let uuid = BluetoothUUID(key) else {
                throw CLIError.usage("--service-data: \"\(key)\" is not a UUID")
            }
            advertisement.serviceData[uuid] = bytes
        }
        for text in arguments.allValues("manufacturer-data") {
            let (key, bytes) = try keyAndHex(text, option: "manufacturer-data")
            let digits = key.lowercased().hasPrefix("0x") ? String(key.dropFirst(2)) : key
            guard let company = UInt16(digits, radix: key.lowercased().hasPrefix("0x") ? 16 : 10) else {
                throw CLIError.usage("--manufacturer-data: \"\(key)\" is not a company id (0…65535 or 0x0000…0xffff)")
            }
            advertisement.manufacturerData[company] = bytes
        }
        if let text = arguments.value("tx-power") {
            guard let power = Int8(text), (-127...20).contains(power) else {
                throw CLIError.usage("--tx-power: expected -127…20 dBm")
            }
            advertisement.txPower = power
        }
        if let text = arguments.value("appearance") {
            let digits = text.lowercased().hasPrefix("0x") ? String(text.dropFirst(2)) : text
            guard let value = UInt16(digits, radix: text.lowercased().hasPrefix("0x") ? 16 : 10) else {
                throw CLIError.usage("--appearance: expected 0…65535 or 0x0000…0xffff")
            }
            advertisement.appearance = value
        }
        return advertisement
    }

    /// The UUIDs of every `--option` (each may list several, comma-separated).
    private static func uuids(_ arguments: ParsedArguments, _ option: String, example: String) throws -> [BluetoothUUID]
    {
        try arguments.allValues(option).flatMap { $0.split(separator: ",") }.map { text in
            guard let uuid = BluetoothUUID(text.trimmingWhitespace()) else {
                throw CLIError.usage("--\(option): \"\(text)\" is not a UUID (e.g. \(example))")
            }
            return uuid
        }
    }

    private static func keyAndHex(_ text: String, option: String) throws -> (String, [UInt8]) {
        let parts = text.split(separator: "=", maxSplits: 1).map(String.init)
        guard parts.count == 2, let bytes = Hex.decode(parts[1], separators: " ,:-", prefixes: true) else {
            throw CLIError.usage("--\(option): expected KEY=HEX, got \"\(text)\"")
        }
        return (parts[0], bytes)
    }

    /// Starts the manager and waits for `.poweredOn`.
    static func start(_ settings: Settings) async throws -> PeripheralSession {
        let (loop, manager) = try await startPoweredOn(loopName: "gattway-peripheral", timeout: settings.timeout) {
            loop in
            try await PeripheralManager.start(
                options: PeripheralOptions(adapter: AdapterSelector(settings.adapter)), on: loop)
        }
        return PeripheralSession(loop: loop, manager: manager)
    }

    func close() async {
        await manager.close()
        loop.shutdown()
    }

    /// Runs `body` with the manager's events until `duration` passes or SIGINT/SIGTERM, then closes.
    func run(duration: Double?, _ body: @escaping @Sendable (PeripheralEvent) async -> Void) async {
        let events = await manager.events()
        let printer = Task {
            for await event in events { await body(event) }
        }
        if let duration {
            try? await Task.sleep(for: .nanoseconds(Int64(saturating: duration * 1e9)))
        } else {
            _ = await SignalSources.waitForTermination()
        }
        printer.cancel()
        await close()
    }

    /// One output line: text, or a JSON object with `event` first.
    static func line(json: Bool, _ event: String, _ fields: [(key: String, value: JSONValue)], text: String) -> String {
        json ? JSONValue.object([(key: "event", value: .string(event))] + fields).serialized + "\n" : text + "\n"
    }
}
