import Bluetooth

/// Which of the gateway's adapters a new link goes through (docs/config.md, "Several adapters"):
/// pure bookkeeping, fed by every report of the gateway's scans and by the links' ups and downs.
///
/// A link goes through the adapter that heard the device strongest within the last
/// ``heardFor`` seconds among the usable adapters with a free slot (fewer than
/// `max_connections` links of the gateway on it); a device no such adapter heard lately goes to
/// the first usable one with a free slot. When every usable adapter is full the strongest
/// usable one is taken anyway (the gateway's own limit, `max_connections` × the adapters, keeps
/// that rare: links made by other clients of bluetoothd are not counted). One link per device:
/// the adapter that has it owns the device's GATT operations until the link ends.
///
/// A device with a preferred adapter (`prefer_adapter`) goes through that adapter whenever its
/// last report there is within ``heardFor`` and at or above the floor (`prefer_floor_dbm`) and it
/// has a free slot, however much better another adapter hears the device; otherwise (it lapsed:
/// no recent report there, or a weaker one, or it is off or full) as above.
///
/// The gateway connects a device at its first report; the other adapters may not have heard it
/// yet. So a device's link waits until every usable adapter heard it or ``settle`` seconds
/// passed since its first report (``wait(for:usable:at:)``).
struct AdapterChoice: Sendable {
    /// Seconds a report counts for the choice.
    static let heardFor: Double = 60
    /// Seconds after a device's first report that its first link may wait for the other
    /// adapters to hear it.
    static let settle: Double = 1
    /// At most this many addresses are remembered (a street of phones with rotating addresses
    /// must not grow it without bound): when full, emptied, as the central's name table is.
    static let addressLimit = 4096

    /// One adapter's last report of a device.
    struct Heard: Sendable, Equatable {
        var rssi: Int16
        var at: Double
    }

    let adapters: Int
    /// `max_connections`: links per adapter.
    let slotsPerAdapter: Int
    /// A device as the adapters heard it.
    struct Entry: Sendable, Equatable {
        /// When any adapter heard it first (since it was remembered).
        var first: Double
        /// The last report of each adapter (nil: not heard by it).
        var each: [Heard?]
    }
    /// The devices heard, by address.
    private(set) var heard: [BluetoothAddress: Entry] = [:]
    /// The adapter each link (connected or being made) goes through.
    private(set) var owners: [BluetoothAddress: Int] = [:]
    /// Preferred adapters (`prefer_adapter`): the adapter and the floor (dBm), by address; bounded
    /// as ``heard`` is.
    private(set) var preferred: [BluetoothAddress: (adapter: Int, floor: Int)] = [:]
    /// Reports per adapter since the start (for `bridge/health`).
    private(set) var reports: [Int]

    init(adapters: Int, slotsPerAdapter: Int) {
        self.adapters = adapters
        self.slotsPerAdapter = slotsPerAdapter
        reports = Array(repeating: 0, count: adapters)
    }

    /// `adapter` heard `address` at `rssi` (nil: the controller had none, counted as −127).
    mutating func heard(_ adapter: Int, _ address: BluetoothAddress, rssi: Int16?, at now: Double) {
        reports[adapter] &+= 1
        guard adapters > 1 else { return }  // one adapter: nothing to choose
        let sample = Heard(rssi: rssi ?? -127, at: now)
        if heard[address] != nil {
            heard[address]?.each[adapter] = sample
            return
        }
        if heard.count >= Self.addressLimit { heard.removeAll(keepingCapacity: true) }
        var entry = Entry(first: now, each: [Heard?](repeating: nil, count: adapters))
        entry.each[adapter] = sample
        heard[address] = entry
    }

    /// `address` prefers `adapter` while that adapter hears it at or above `floor` dBm.
    mutating func prefer(_ address: BluetoothAddress, adapter: Int, floor: Int) {
        guard (0..<adapters).contains(adapter) else { return }
        if preferred[address] == nil, preferred.count >= Self.addressLimit {
            preferred.removeAll(keepingCapacity: true)
        }
        preferred[address] = (adapter, floor)
    }

    /// Whether the device's preferred adapter hears it now: a report within ``heardFor`` at or
    /// above its floor.
    func hearsPreferred(_ address: BluetoothAddress, at now: Double) -> Int? {
        guard let preference = preferred[address], let entry = heard[address],
            entry.each.indices.contains(preference.adapter), let sample = entry.each[preference.adapter],
            now - sample.at <= Self.heardFor, Int(sample.rssi) >= preference.floor
        else { return nil }
        return preference.adapter
    }

    /// Links going through `adapter` now.
    func links(on adapter: Int) -> Int { owners.values.count { $0 == adapter } }

    /// The adapter a new link to `address` should go through; `usable[i]` says whether adapter
    /// i can be used now (powered on). None usable: the first adapter (whose error the attempt
    /// then reports).
    func best(for address: BluetoothAddress, usable: [Bool], at now: Double) -> Int {
        if let owner = owners[address] { return owner }
        let candidates = (0..<adapters).filter { usable.indices.contains($0) && usable[$0] }
        guard !candidates.isEmpty else { return 0 }
        let free = candidates.filter { links(on: $0) < slotsPerAdapter }
        let pool = free.isEmpty ? candidates : free
        if let adapter = hearsPreferred(address, at: now), free.contains(adapter) { return adapter }
        let samples = heard[address]?.each ?? []
        func strength(_ adapter: Int) -> Int {
            guard samples.indices.contains(adapter), let sample = samples[adapter], now - sample.at <= Self.heardFor
            else { return Int.min }
            return Int(sample.rssi)
        }
        // max(by:) keeps the first of equals: a tie goes to the earlier adapter.
        return pool.max { strength($0) < strength($1) } ?? pool[0]
    }

    /// Seconds a new link to `address` should wait so that every usable adapter can hear the
    /// device first: 0 with one usable adapter, once each usable adapter heard it, for a device
    /// already linked, and from ``settle`` seconds after its first report on.
    func wait(for address: BluetoothAddress, usable: [Bool], at now: Double) -> Double {
        guard owners[address] == nil, usable.count(where: { $0 }) > 1, let entry = heard[address] else { return 0 }
        // The preferred adapter heard it above the floor: nothing to wait for.
        if let adapter = hearsPreferred(address, at: now), usable.indices.contains(adapter), usable[adapter] {
            return 0
        }
        let unheard = usable.indices.contains { usable[$0] && entry.each.indices.contains($0) && entry.each[$0] == nil }
        guard unheard else { return 0 }
        return max(0, entry.first + Self.settle - now)
    }

    /// A link to `address` goes through `adapter` from now on (a new attempt, or one found up);
    /// false when another adapter already has it.
    @discardableResult
    mutating func claim(_ address: BluetoothAddress, on adapter: Int) -> Bool {
        if let owner = owners[address] { return owner == adapter }
        owners[address] = adapter
        return true
    }

    /// The link to `address` through `adapter` ended (or was never made).
    mutating func release(_ address: BluetoothAddress, on adapter: Int) {
        if owners[address] == adapter { owners.removeValue(forKey: address) }
    }

    /// Every link through `adapter` ended (it was removed).
    mutating func releaseAll(on adapter: Int) {
        owners = owners.filter { $0.value != adapter }
    }
}
