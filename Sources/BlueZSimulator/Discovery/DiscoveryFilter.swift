import Bluetooth

/// One client's discovery filter (`Adapter1.SetDiscoveryFilter`), as BlueZ 5.66 keeps it.
public struct DiscoveryFilter: Sendable, Equatable {
    public enum Transport: String, Sendable { case auto, le, bredr }

    /// Report only devices advertising one of these service UUIDs; empty means any.
    public var uuids: [BluetoothUUID] = []
    /// Drop reports weaker than this (dBm).
    public var rssi: Int16?
    /// Drop reports whose TxPower − RSSI exceeds this.
    public var pathloss: UInt16?
    public var transport: Transport = .auto
    /// A PropertiesChanged for every report carrying manufacturer or service data.
    public var duplicateData = false
    public var discoverable = false
    /// Prefix of the address string or the advertised name; "" matches all.
    public var pattern: String?

    public init() {}
}

/// The filters of every discovering client merged the way bluetoothd merges them before handing
/// the kernel one filter: union of UUIDs, lowest RSSI, DuplicateData if anyone wants it; a client
/// discovering without a filter makes the whole scan unfiltered. (5.66 semantics; see
/// docs/bluez.md §3.1 — a pattern, once any client sets one, filters for everyone.)
public struct MergedDiscoveryFilter: Sendable, Equatable {
    /// True when every discovering client set a filter.
    public var isFiltered: Bool
    /// nil: no UUID filter.
    public var uuids: Set<BluetoothUUID>?
    /// nil: no RSSI filter.
    public var rssi: Int16?
    public var duplicateData: Bool
    /// Non-empty: a device must match one of these prefixes.
    public var patterns: [String]

    /// Merges the filters of the discovering clients (`nil` for a client without a filter).
    public init(_ filters: [DiscoveryFilter?]) {
        duplicateData = filters.contains { $0?.duplicateData == true }
        patterns = filters.compactMap { $0?.pattern }.filter { !$0.isEmpty }
        let set = filters.compactMap { $0 }
        guard !filters.isEmpty, set.count == filters.count else {
            isFiltered = false
            uuids = nil
            rssi = nil
            return
        }
        isFiltered = true
        uuids = set.contains { $0.uuids.isEmpty } ? nil : Set(set.flatMap(\.uuids))
        rssi = set.contains { $0.rssi == nil } ? nil : set.compactMap(\.rssi).min()
    }

    /// Whether a report passes the merged filter (the kernel's UUID and RSSI check, the
    /// discoverable-flag gate of unfiltered LE scans, and patterns).
    public func admits(
        address: BluetoothAddress, name: String?, serviceUUIDs: [BluetoothUUID], rssi: Int16, discoverable: Bool
    ) -> Bool {
        if !isFiltered && !discoverable && patterns.isEmpty { return false }
        if let uuids, !serviceUUIDs.contains(where: uuids.contains) { return false }
        if let threshold = self.rssi, rssi < threshold { return false }
        if !patterns.isEmpty {
            let text = address.description
            guard patterns.contains(where: { text.hasPrefix($0) || (name?.hasPrefix($0) ?? false) }) else {
                return false
            }
        }
        return true
    }
}
