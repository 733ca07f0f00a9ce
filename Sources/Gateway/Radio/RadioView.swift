import Bluetooth
import JSON

/// A view of the radio at one moment (``RadioView/snapshot(now:since:)``).
public struct RadioSnapshot: Sendable {
    /// The addresses heard within the window (changed after `since`), the most recent first.
    public var entries: [RadioEntry]
    /// Reports per second, all addresses, over the last measuring interval.
    public var reportsPerSecond: Double
    /// Pass it as `since` to get only what changed after this snapshot.
    public var sequence: UInt64
    /// Addresses held now (within the window or not yet swept), and the bound.
    public var addresses: Int
    public var maxAddresses: Int
    /// Addresses evicted to stay within the bound, since the start.
    public var evicted: Int
}

/// What the radio hears: every address heard in the last ``window`` seconds (at most
/// ``maxAddresses``; beyond it the longest silent are evicted, so addresses that rotate or an
/// attacker's thousands cannot grow it), with its last RSSI per adapter, report count and rate,
/// last AD bytes (bounded), address type, last seen and what became of its last report
/// (``RadioOutcome``). The raw radio on MQTT (`mqtt.raw_advertisements`) and the page read it.
///
/// Loop-confined, like the rest of the core: read it on the loop (``Gateway/radioSnapshot(since:)``,
/// ``Gateway/observeRadio(_:)``).
public final class RadioView {
    /// AD bytes beyond this are not kept (a legacy advertisement and its scan response are 62;
    /// extended advertising reports may be longer).
    public static let maxDataLength = 255
    /// A local name is shown with at most this many characters.
    public static let maxNameLength = 64
    /// RSSI is kept for at most this many adapters (`bluetooth.adapters` allows 8).
    public static let maxAdapters = 8
    /// The measuring interval of the rates (seconds).
    static let rateInterval = 5.0

    public let maxAddresses: Int
    public let window: Double

    // The properties ``note(_:outcome:decode:now:wallOffset:details:trial:)`` touches with every
    // report go without the run-time exclusivity checks (~65 instructions an access, five a
    // report): the view is loop-confined and no access overlaps another — the one open while
    // other code runs, `entries`' during ``update``, calls only `trial`, which decodes and does
    // not touch the view; observers are called after it ends, with a copy of the entry.
    @exclusivity(unchecked) private var entries: [RadioEntry] = []
    @exclusivity(unchecked) private var index = AddressIndex()
    @exclusivity(unchecked) private var sequence: UInt64 = 0
    private(set) var evicted = 0
    @exclusivity(unchecked) private var windowStart: Double
    @exclusivity(unchecked) private var windowCount = 0
    @exclusivity(unchecked) private(set) var reportsPerSecond: Double = 0
    @exclusivity(unchecked) private var observers: [Int: (RadioEntry) -> Void] = [:]
    private var nextObserver = 0
    /// Seconds for which an address's content (its advertisement, AD bytes, parser, device) is
    /// taken from one report and not from the next (0: from every report). The page's radio view,
    /// which reads the view every 2 s, does not need each report's content: its reports are
    /// then noted as their numbers (RSSI, adapter, time, counts, outcome), and the content is
    /// at most this old. The raw radio on MQTT and observers take every report's.
    @exclusivity(unchecked) public var contentInterval = 0.0

    /// What the raw radio does with a report (``publishDecision(_:mode:interval:now:)``).
    enum PublishDecision: Equatable {
        case publish
        /// Within `interval` of the address's last publication.
        case rateLimited
        /// `changed` mode: the same as the address's last publication.
        case unchanged
    }

    public init(maxAddresses: Int, window: Double, now: Double = 0) {
        self.maxAddresses = max(1, maxAddresses)
        self.window = window
        windowStart = now
    }

    public var count: Int { entries.count }

    /// The entry of `address`, if it is in the view.
    public func entry(_ address: BluetoothAddress) -> RadioEntry? { index[address].map { entries[$0] } }

    /// Notes one report and what became of it; returns the entry's slot (valid until the next
    /// ``note(_:outcome:decode:parser:device:now:wall:trial:)``). `outcome` is what the gateway
    /// did; `decode`/`parser` what the parsers made of it, when the gateway's decoding ran.
    /// `trial` decodes an untracked report (nil for a tracked one); it runs only when the
    /// address's content changed, so a steady sender is decoded once. With ``contentInterval``
    /// and no observer, a report of an address whose content was taken less than that ago adds
    /// only its numbers (RSSI, adapter, time, counts, outcome).
    /// The core calls it for every report; public for tools and the fuzz target.
    @discardableResult
    public func note(
        _ discovery: BLEDiscovery, outcome: RadioOutcome, decode: RadioOutcome?, parser: String?, device: String?,
        now: Double, wall: Int64, trial: (BLEDiscovery) -> (RadioOutcome, String?)
    ) -> Int {
        note(
            discovery, outcome: outcome, decode: decode, now: now, wallOffset: Double(wall) - now * 1000,
            details: { (parser, device) }, trial: trial)
    }

    /// ``note(_:outcome:decode:parser:device:now:wall:trial:)`` with the parser and device
    /// asked for (`details`) only when the report's content is taken (``contentInterval``), and
    /// the wall clock as its offset from the gateway clock's (milliseconds; the report's wall
    /// time is made of it when read: ``RadioEntry/lastSeenWall``).
    func note(
        _ discovery: BLEDiscovery, outcome: RadioOutcome, decode: RadioOutcome?, now: Double, wallOffset: Double,
        details: () -> (parser: String?, device: String?), trial: (BLEDiscovery) -> (RadioOutcome, String?)
    ) -> Int {
        sequence &+= 1
        windowCount += 1
        if now - windowStart >= Self.rateInterval {
            reportsPerSecond = Double(windowCount) / (now - windowStart)
            windowStart = now
            windowCount = 0
        }
        let slot: Int
        let same: Bool
        if let existing = index[discovery.address] {
            slot = existing
            if contentInterval > 0, observers.isEmpty, entries[slot].reports > 0 {
                let age = now - entries[slot].contentAt
                if age >= 0, age < contentInterval {
                    // Its content was taken less than contentInterval ago: the report's numbers only.
                    Self.tally(
                        &entries[slot], discovery, outcome: outcome, decode: decode, sequence: sequence, now: now,
                        wallOffset: wallOffset)
                    return slot
                }
            }
            // Only an untracked report needs to know (its trial decode runs once per content);
            // a tracked one takes the report's content as it is, without comparing it.
            same = decode == nil && entries[slot].reports > 0 && entries[slot].sameContent(discovery)
        } else {
            slot = insert(discovery.address, now: now)
            same = false
        }
        // In place (not copied out and back: that would share the entry's arrays with the
        // copy and so make the RSSI's a new allocation with every report).
        let (parser, device) = details()
        Self.update(
            &entries[slot], discovery, same: same, outcome: outcome, decode: decode, parser: parser, device: device,
            sequence: sequence, now: now, wallOffset: wallOffset, trial: trial)
        if !observers.isEmpty {
            let entry = entries[slot]
            for observer in observers.values { observer(entry) }
        }
        return slot
    }

    /// What every report changes: the counts and rate, its time and adapter.
    @inline(__always)
    private static func count(
        _ entry: inout RadioEntry, _ discovery: BLEDiscovery, sequence: UInt64, now: Double, wallOffset: Double
    ) {
        entry.sequence = sequence
        entry.reports += 1
        entry.windowCount += 1
        if now - entry.windowStart >= Self.rateInterval {
            entry.reportsPerSecond = Double(entry.windowCount) / (now - entry.windowStart)
            entry.windowStart = now
            entry.windowCount = 0
        }
        entry.lastSeen = now
        entry.wallOffset = wallOffset
        entry.adapter = discovery.adapter
    }

    /// A report whose content is not taken (``contentInterval``): its numbers — counts and
    /// rate, time, adapter and RSSI, address type, outcome — without its advertisement, AD bytes
    /// or names (no copy, nothing retained or freed).
    @inline(__always)
    private static func tally(
        _ entry: inout RadioEntry, _ discovery: BLEDiscovery, outcome: RadioOutcome, decode: RadioOutcome?,
        sequence: UInt64, now: Double, wallOffset: Double
    ) {
        count(&entry, discovery, sequence: sequence, now: now, wallOffset: wallOffset)
        if let type = discovery.addressType { entry.addressType = type }
        let rssi = discovery.advertisement.rssi
        entry.advertisement.rssi = rssi
        let adapter = Int(discovery.adapter)
        if adapter < Self.maxAdapters {
            if entry.rssi.count <= adapter { entry.rssi += repeatElement(nil, count: adapter + 1 - entry.rssi.count) }
            entry.rssi[adapter] = rssi
        }
        entry.outcome = outcome
        if let decode { entry.decode = decode }
    }

    /// ``note(_:outcome:decode:parser:device:now:wall:trial:)``'s change of one entry.
    @inline(__always)
    private static func update(
        _ entry: inout RadioEntry, _ discovery: BLEDiscovery, same: Bool, outcome: RadioOutcome,
        decode: RadioOutcome?, parser: String?, device: String?, sequence: UInt64, now: Double, wallOffset: Double,
        trial: (BLEDiscovery) -> (RadioOutcome, String?)
    ) {
        count(&entry, discovery, sequence: sequence, now: now, wallOffset: wallOffset)
        entry.contentAt = now
        if let type = discovery.addressType { entry.addressType = type }
        if !same {
            entry.advertisement = discovery.advertisement
            if let data = discovery.data {
                entry.rawData = data.count > Self.maxDataLength ? Array(data.prefix(Self.maxDataLength)) : data
            } else {
                entry.rawData = nil
            }
        } else {
            entry.advertisement.rssi = discovery.advertisement.rssi
        }
        let adapter = Int(discovery.adapter)
        if adapter < Self.maxAdapters {
            if entry.rssi.count <= adapter { entry.rssi += repeatElement(nil, count: adapter + 1 - entry.rssi.count) }
            entry.rssi[adapter] = discovery.advertisement.rssi
        }
        let wasUntracked = entry.outcome.isUntracked && entry.reports > 1
        entry.outcome = outcome
        entry.device = device
        if let decode {
            entry.decode = decode
            entry.parser = parser
        } else if !(same && wasUntracked) {
            // An untracked report: what would a parser make of it? Once per content.
            (entry.decode, entry.parser) = trial(discovery)
        }
    }

    /// A slot for `address`, evicting when the view is full: first what is older than the
    /// window, then, if that freed nothing, the longest silent quarter (at once, so that a flood of
    /// new addresses costs one sort per ``maxAddresses``/4 of them, not a search per address).
    private func insert(_ address: BluetoothAddress, now: Double) -> Int {
        if entries.count >= maxAddresses {
            let cutoff = now - window
            var keep = entries.filter { $0.lastSeen >= cutoff }
            if keep.count >= maxAddresses {
                let drop = max(1, maxAddresses / 4)
                let newestDropped = keep.map(\.lastSeen).sorted()[drop - 1]
                var dropped = 0
                keep.removeAll { entry in
                    guard dropped < drop, entry.lastSeen <= newestDropped else { return false }
                    dropped += 1
                    return true
                }
            }
            evicted += entries.count - keep.count
            entries = keep
            index.removeAll()
            for (slot, entry) in entries.enumerated() { index.set(entry.address, slot) }
        }
        entries.append(RadioEntry(address: address, now: now, sequence: sequence))
        index.set(address, entries.count - 1)
        return entries.count - 1
    }

    /// Whether the raw radio publishes the report just noted in `slot`: at most one message per
    /// address per `interval`, and in `changed` mode only what differs from the address's last
    /// message (its AD bytes, address type or outcome). Records a publication.
    func publishDecision(_ slot: Int, mode: RawAdvertisementSettings.Mode, interval: Double, now: Double)
        -> PublishDecision
    {
        var content: Int?
        if mode == .changed {
            let hash = entries[slot].contentHash
            if entries[slot].publishedContent == hash { return .unchanged }
            content = hash
        }
        if now - entries[slot].publishedAt < interval { return .rateLimited }
        entries[slot].publishedAt = now
        entries[slot].publishedContent = content
        return .publish
    }

    func entry(at slot: Int) -> RadioEntry { entries[slot] }

    /// The addresses heard within the window that changed after `since` (0: all), the most
    /// recently heard first.
    public func snapshot(now: Double, since: UInt64 = 0) -> RadioSnapshot {
        let cutoff = now - window
        let heard = entries.filter { $0.lastSeen >= cutoff && $0.sequence > since }.sorted { $0.lastSeen > $1.lastSeen }
        let rate = now - windowStart >= 1 ? Double(windowCount) / (now - windowStart) : reportsPerSecond
        return RadioSnapshot(
            entries: heard, reportsPerSecond: rate, sequence: sequence, addresses: entries.count,
            maxAddresses: maxAddresses, evicted: evicted)
    }

    /// Calls `handler` on the loop with each entry a report changed, until
    /// ``stopObserving(_:)``. It must not block: it runs on the advertisement hot path.
    public func observe(_ handler: @escaping (RadioEntry) -> Void) -> Int {
        nextObserver += 1
        observers[nextObserver] = handler
        return nextObserver
    }

    public func stopObserving(_ token: Int) {
        observers.removeValue(forKey: token)
    }

    /// Whether a handler of ``observe(_:)`` is registered.
    public var isObserved: Bool { !observers.isEmpty }
}
