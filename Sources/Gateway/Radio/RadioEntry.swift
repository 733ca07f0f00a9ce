import Bluetooth
import JSON

/// One address the radio heard, as the last report left it (``RadioView``).
public struct RadioEntry: Sendable {
    public let address: BluetoothAddress
    /// Public or random, when the report said (nil on ports that do not).
    public internal(set) var addressType: BluetoothAddress.AddressType?
    /// The advertisement as decoded (name, service UUIDs, service and manufacturer data, TX power).
    public internal(set) var advertisement: AdvertisementData
    /// The AD bytes as the controller gave them (the management path), at most
    /// ``RadioView/maxDataLength``; nil on the D-Bus path, where ``data`` is rebuilt.
    public internal(set) var rawData: [UInt8]?
    /// The last RSSI (dBm) per adapter (index in `bluetooth.adapters`), nil where that adapter
    /// has not heard it or the report had none. At most ``RadioView/maxAdapters`` slots.
    public internal(set) var rssi: [Int16?]
    /// The adapter of the last report.
    public internal(set) var adapter: UInt8
    /// Reports since the address entered the view.
    public internal(set) var reports: Int
    /// Reports per second over the last measuring interval (5 s; 0 before the first ends).
    public internal(set) var reportsPerSecond: Double
    /// The gateway clock's time (seconds) of the first and the last report.
    public internal(set) var firstSeen: Double
    public internal(set) var lastSeen: Double
    /// Wall-clock milliseconds since 1970 of the last report.
    public var lastSeenWall: Int64 { Int64(saturating: (lastSeen * 1000 + wallOffset).rounded()) }
    /// The wall clock's milliseconds minus the gateway clock's at the last report (noted as it
    /// is, not made a time with every report).
    var wallOffset: Double
    /// What the gateway did with the last report.
    public internal(set) var outcome: RadioOutcome
    /// What the parsers made of its payload: ``RadioOutcome/decoded`` or why not (for an
    /// untracked report, from a trial decode without a device state).
    public internal(set) var decode: RadioOutcome
    /// The format that decoded it (`bthome_v2`, `ruuvi_v5`, …), when one did.
    public internal(set) var parser: String?
    /// The device (topic level below the base topic) its readings went to, when tracked.
    public internal(set) var device: String?
    /// Grows with every change of any entry of the view: the entry changed after a snapshot
    /// whose ``RadioSnapshot/sequence`` is below this.
    public internal(set) var sequence: UInt64

    // The rate's measuring interval and the raw radio's last publication.
    var windowStart: Double
    var windowCount = 0
    var publishedAt = -Double.infinity
    var publishedContent: Int?
    /// The gateway clock's time the content (advertisement, AD bytes, parser, device) was last
    /// taken from a report (``RadioView/contentInterval``).
    var contentAt = -Double.infinity

    /// The AD bytes: as received, or rebuilt from BlueZ's properties on the D-Bus path
    /// (``isRebuilt``; no flags, at most 62 bytes: docs/bluez.md).
    public var data: [UInt8] {
        if let rawData { return rawData }
        var content = advertisement
        content.rssi = nil
        return AdvertisementBytes.build(content)
    }

    /// Whether ``data`` was rebuilt from D-Bus properties rather than received.
    public var isRebuilt: Bool { rawData == nil }

    /// The last report's RSSI.
    public var lastRSSI: Int16? { advertisement.rssi }

    /// The local name, at most ``RadioView/maxNameLength`` characters.
    public var name: String? {
        guard let name = advertisement.localName else { return nil }
        return name.count > RadioView.maxNameLength ? String(name.prefix(RadioView.maxNameLength)) : name
    }

    init(address: BluetoothAddress, now: Double, sequence: UInt64) {
        self.address = address
        advertisement = AdvertisementData()
        rssi = []
        adapter = 0
        reports = 0
        reportsPerSecond = 0
        firstSeen = now
        lastSeen = now
        wallOffset = -now * 1000
        outcome = .unknownFormat
        decode = .unknownFormat
        self.sequence = sequence
        windowStart = now
    }

    /// Whether `discovery` carries what this entry holds (RSSI aside).
    func sameContent(_ discovery: BLEDiscovery) -> Bool {
        if let rawData, let data = discovery.data { return rawData == data }
        guard rawData == nil, discovery.data == nil else { return false }
        var content = discovery.advertisement
        content.rssi = advertisement.rssi
        return content == advertisement
    }

    /// A hash of what the raw radio's `changed` mode compares.
    var contentHash: Int {
        var hasher = Hasher()
        if let rawData {
            hasher.combine(rawData)
        } else {
            var content = advertisement
            content.rssi = nil
            hasher.combine(content)
        }
        hasher.combine(addressType)
        hasher.combine(outcome)
        hasher.combine(decode)
        hasher.combine(parser)
        hasher.combine(device)
        return hasher.finalize()
    }

    /// The entry as the raw radio publishes it (`<base>/bridge/radio/<address>`) and the page
    /// shows it. `adapters` names the adapters by index (`bluetooth.adapters`). Everything
    /// from the radio is escaped by the JSON writer, and bounded (data, name).
    public func json(adapters: [String]) -> JSONValue {
        var bytes: [UInt8] = []
        write(adapters: adapters, into: &bytes)
        return (try? JSONValue.parse(bytes)) ?? .null
    }

    /// ``json(adapters:)`` written as JSON text onto `bytes`, without building a ``JSONValue``
    /// (the page's radio view writes one per address every 2 s): `{"address", "address_type",
    /// "adapter", "rssi", "rssi_by_adapter" (with several adapters), "data", "source", "name",
    /// "outcome", "decode", "parser", "device", "reports", "reports_per_second", "last_seen"`,
    /// then `"rule": rule` when `rule` is given (the page's mark of a suggestable rule)`}`.
    public func write(adapters: [String], into bytes: inout [UInt8], rule: Bool? = nil) {
        bytes += #"{"address":"#.utf8
        JSONValue.writeString(address.description, into: &bytes)
        if let addressType {
            bytes += #","address_type":"#.utf8
            JSONValue.writeString(addressType.rawValue, into: &bytes)
        }
        bytes += #","adapter":"#.utf8
        writeAdapter(Int(adapter), adapters: adapters, into: &bytes)
        if let rssi = lastRSSI {
            bytes += #","rssi":"#.utf8
            JSONValue.writeInteger(Int64(rssi), into: &bytes)
        }
        if Self.showsRSSIByAdapter(rssi, adapters: adapters) {
            bytes += #","rssi_by_adapter":"#.utf8
            writeRSSIByAdapter(adapters: adapters, into: &bytes)
        }
        bytes += #","data":""#.utf8
        for byte in data {
            bytes.append(Hex.digit(byte >> 4))
            bytes.append(Hex.digit(byte & 0x0F))
        }
        bytes += (isRebuilt ? #"","source":"dbus""# : #"","source":"mgmt""#).utf8
        if let name {
            bytes += #","name":"#.utf8
            JSONValue.writeString(name, into: &bytes)
        }
        bytes += #","outcome":"#.utf8
        JSONValue.writeString(outcome.name, into: &bytes)
        bytes += #","decode":"#.utf8
        JSONValue.writeString(decode.name, into: &bytes)
        if let parser {
            bytes += #","parser":"#.utf8
            JSONValue.writeString(parser, into: &bytes)
        }
        if let device {
            bytes += #","device":"#.utf8
            JSONValue.writeString(device, into: &bytes)
        }
        bytes += #","reports":"#.utf8
        JSONValue.writeInteger(Int64(reports), into: &bytes)
        bytes += #","reports_per_second":"#.utf8
        JSONValue.writeNumber((reportsPerSecond * 100).rounded() / 100, into: &bytes)
        bytes += #","last_seen":"#.utf8
        Timestamp.write(milliseconds: lastSeenWall, into: &bytes, quoted: true)
        if let rule { bytes += (rule ? #","rule":true"# : #","rule":false"#).utf8 }
        bytes.append(UInt8(ascii: "}"))
    }

    /// The last RSSI per adapter as ``json(adapters:)`` has it under `rssi_by_adapter`; nil when
    /// it has none (one adapter heard it, one is configured).
    public func rssiByAdapter(adapters: [String]) -> JSONValue? {
        guard Self.showsRSSIByAdapter(rssi, adapters: adapters) else { return nil }
        var bytes: [UInt8] = []
        writeRSSIByAdapter(adapters: adapters, into: &bytes)
        return try? JSONValue.parse(bytes)
    }

    private static func showsRSSIByAdapter(_ rssi: [Int16?], adapters: [String]) -> Bool {
        rssi.count > 1 || adapters.count > 1
    }

    /// The last RSSI per adapter as a JSON object keyed by the adapters' names (the page's
    /// device list shows it beside each device when several adapters heard it).
    public func writeRSSIByAdapter(adapters: [String], into bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "{"))
        var first = true
        for (index, value) in rssi.enumerated() {
            guard let value else { continue }
            if !first { bytes.append(UInt8(ascii: ",")) }
            first = false
            writeAdapter(index, adapters: adapters, into: &bytes)
            bytes.append(UInt8(ascii: ":"))
            JSONValue.writeInteger(Int64(value), into: &bytes)
        }
        bytes.append(UInt8(ascii: "}"))
    }

    /// An adapter's name (`bluetooth.adapters`), or `adapter<index>` beyond them, as a JSON string.
    private func writeAdapter(_ index: Int, adapters: [String], into bytes: inout [UInt8]) {
        if adapters.indices.contains(index) {
            JSONValue.writeString(adapters[index], into: &bytes)
        } else {
            bytes += #""adapter"#.utf8
            JSONValue.writeInteger(Int64(index), into: &bytes)
            bytes.append(UInt8(ascii: "\""))
        }
    }
}
