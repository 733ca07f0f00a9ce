import Bluetooth
import JSON

/// `bluetooth` in config.json: the adapters, the scan filter and connection limits.
public struct BluetoothSettings: Sendable, Equatable {
    /// `adapters` (or `adapter`, one of them): the adapters that scan and connect, e.g.
    /// `["hci0", "hci1"]`; never empty, no name twice, at most ``maxAdapters``.
    public var adapters = ["hci0"]
    /// The first of ``adapters``: the peripheral role's adapter when `peripheral.adapter` names
    /// none, and the one the central's state file `central.json` belongs to.
    public var adapter: String { adapters[0] }
    /// At most this many adapters in `adapters`.
    public static let maxAdapters = 8
    /// `radio`: where advertising reports are read (docs/config.md, "The radio").
    public var radio = RadioChoice.auto

    /// Where advertising reports are read.
    public enum RadioChoice: String, Sendable, Equatable, CaseIterable {
        /// The kernel's management socket when the process may use it, else D-Bus; one log
        /// line says which and why.
        case auto
        /// The kernel's management socket: every report with its bytes; without it, no start.
        case mgmt
        /// bluetoothd's D-Bus view (`Device1` properties, merged per device).
        case dbus
    }
    /// `scan_mode`: how the radio scans (docs/config.md, "Scan modes").
    public var scanMode = ScanModeChoice.active

    /// How the radio scans.
    public enum ScanModeChoice: String, Sendable, Equatable, CaseIterable {
        /// Scan requests: every advertisement and its scan response (bluetoothd's discovery).
        case active
        /// Listening only (the kernel's monitor scan, management path only): no scan responses.
        case passive
        /// Passive, with active windows while something needs scan responses: a name rule whose
        /// name was not heard yet, a proxy client that asked for active.
        case auto
    }
    /// `scan.services`: only devices advertising one of these services (as a service UUID or
    /// service data) are considered; empty: every device.
    public var scanServices: [BluetoothUUID] = []
    /// `scan.rssi_threshold`: weaker advertisements are ignored (dBm); nil: no threshold.
    public var rssiThreshold: Int?
    /// At most this many links (connected or connecting) at a time per adapter: the gateway
    /// holds at most ``maxConnections`` × the number of ``adapters`` (``totalConnections``).
    public var maxConnections = 3
    /// At most this many links at a time over every adapter.
    public var totalConnections: Int { maxConnections * adapters.count }
    /// Seconds a connection attempt may take.
    public var connectTimeout: Double = 30
    /// Seconds a GATT read, write or discovery may take.
    public var gattTimeout: Double = 10
    /// Advertisement-only devices not heard for this many seconds are forgotten (removed from
    /// the registry, `bridge/devices` and Home Assistant). Devices a rule names by exactly one
    /// address are kept.
    public var forgetAfter: Double = 3600
    /// A device with `connect` that failed this many connection attempts in a row without ever
    /// having had a link (a beacon matched by a connect rule, say) is parked: tried again only
    /// every ``parkedRetry`` seconds instead of on the backoff. 0: never parked.
    public var parkAfter = 8
    /// Seconds between the attempts at a parked device.
    public var parkedRetry: Double = 3600
    /// `pairing_timeout`: seconds a pairing question (a passkey to enter, a number to compare)
    /// waits for its answer on MQTT before it is refused. Under the 30 s the Security Manager
    /// Protocol gives a pairing step (Core spec Vol 3 Part H 3.4), and under bluetoothd's 60 s
    /// for an agent's reply.
    public var pairingTimeout: Double = 25
    /// The longest ``pairingTimeout``.
    public static let maxPairingTimeout: Double = 55
    /// `report_batch`: seconds the advertising reports may wait so that a steady stream is read in
    /// batches, one wake-up per batch (docs/config.md, "Reading reports in batches"); 0: each
    /// report is read as it arrives.
    public var reportBatch: Double = Self.defaultReportBatch
    /// The default ``reportBatch``, also the longest: at 100 reports a second it takes 100 ms to
    /// bring the gateway's CPU per message under a tenth of Theengs Gateway's (BENCHMARKS.md,
    /// "Reports read in batches"), for about 50 ms of latency added at the median.
    public static let defaultReportBatch: Double = 0.1
    /// The longest ``reportBatch``: the socket buffers hold a batch (the kernel's management
    /// socket some 300 reports; 100 ms at 1,000 reports/s is a third of that).
    public static let maxReportBatch: Double = 0.1
    /// At most this many devices are tracked; beyond it the longest-silent forgettable device
    /// makes room, or the new one is dropped (counted in `bridge/health`).
    public var maxDevices = 1000

    public init() {}

    init(_ object: inout ConfigObject) {
        let one = object.optional("adapter") { try $0.adapterName() }
        let many = object.optional("adapters") { try Self.adapterList($0) }
        if many != nil, let one {
            object.problems.add(
                object.childPath("adapter"),
                "and adapters are both set (\"adapter\": \"\(one)\" is \"adapters\": [\"\(one)\"]; keep one of them)")
        }
        adapters = many ?? one.map { [$0] } ?? adapters
        radio = object.read("radio", default: radio) { reader in
            let text = try reader.string()
            guard let radio = RadioChoice(rawValue: text) else {
                throw reader.fail("\"\(text)\" is not a radio (expected auto, mgmt or dbus)")
            }
            return radio
        }
        scanMode = object.read("scan_mode", default: scanMode) { reader in
            let text = try reader.string()
            guard let mode = ScanModeChoice(rawValue: text) else {
                throw reader.fail("\"\(text)\" is not a scan mode (expected active, passive or auto)")
            }
            return mode
        }
        if let value = object.value("scan"), var scan = ConfigObject(value, object.problems) {
            let problems = object.problems
            scanServices = scan.read("services", default: []) { reader in
                try reader.array().compactMap { item in problems.attempt { try item.uuid() } }
            }
            rssiThreshold = scan.optional("rssi_threshold") { try $0.integer(in: -127...20) }
            scan.finish()
        }
        maxConnections = object.read("max_connections", default: maxConnections) { try $0.integer(in: 1...32) }
        connectTimeout = object.read("connect_timeout", default: connectTimeout) { try $0.positiveDuration() }
        gattTimeout = object.read("gatt_timeout", default: gattTimeout) { try $0.positiveDuration() }
        forgetAfter = object.read("forget_after", default: forgetAfter) { try $0.positiveDuration() }
        maxDevices = object.read("max_devices", default: maxDevices) { try $0.integer(in: 1...100_000) }
        parkAfter = object.read("park_after", default: parkAfter) { try $0.integer(in: 0...1000) }
        parkedRetry = object.read("parked_retry", default: parkedRetry) { try $0.positiveDuration() }
        pairingTimeout = object.read("pairing_timeout", default: pairingTimeout) { reader in
            let seconds = try reader.duration()
            guard seconds >= 1, seconds <= Self.maxPairingTimeout else {
                throw reader.fail("expected a duration from \"1s\" to \"55s\"")
            }
            return seconds
        }
        reportBatch = object.read("report_batch", default: reportBatch) { reader in
            let seconds = try reader.duration()
            guard seconds >= 0, seconds <= Self.maxReportBatch else {
                throw reader.fail("expected a duration from \"0ms\" to \"100ms\"")
            }
            return seconds
        }
        object.finish()
    }

    /// `adapters`: a non-empty list of adapter names without repeats, at most ``maxAdapters``.
    static func adapterList(_ reader: JSONReader) throws -> [String] {
        let items = try reader.array()
        guard !items.isEmpty else { throw reader.fail("is empty (expected one adapter name or more, e.g. [\"hci0\"])") }
        guard items.count <= maxAdapters else {
            throw reader.fail("has \(items.count) adapters (at most \(maxAdapters))")
        }
        var names: [String] = []
        for item in items {
            let name = try item.adapterName()
            guard !names.contains(name) else { throw item.fail("\"\(name)\" is listed twice") }
            names.append(name)
        }
        return names
    }
}
