import Bluetooth

/// What a scan reports (`Adapter1.SetDiscoveryFilter` plus a local re-check: BlueZ broadcasts
/// every device that passed the merged filter of all clients, so each stream filters again).
public struct ScanOptions: Sendable, Hashable {
    /// Report only devices advertising one of these service UUIDs (16/32/128-bit) in their
    /// `UUIDs` or as a `ServiceData` key; nil = all. (Once BlueZ has resolved a device's GATT
    /// services, its `UUIDs` are those services and no longer take advertised UUIDs; the
    /// service data still carries them.)
    public var services: [BluetoothUUID]?
    /// false: a device is reported when first seen and when its advertisement content (name,
    /// UUIDs, manufacturer/service data, TX power) changes; RSSI-only updates are not reported.
    /// true: BlueZ's `DuplicateData` is set and every advertisement report is delivered.
    public var allowDuplicates: Bool
    /// Drop reports weaker than this (dBm); applied by the controller and re-checked locally.
    public var rssiThreshold: Int16?
    /// Whether this scan needs scan responses (`.active`) or listens only (`.passive`). The
    /// manager's radio scans actively while any of its scans is active; when all are passive
    /// and the kernel's management socket is the report source, the kernel scans passively
    /// (an advertisement monitor, no discovery); on the D-Bus path, where bluetoothd 5.66 has
    /// only its active discovery, a passive scan is scanned actively (``CentralManager/scanMode``
    /// says so).
    public var mode: ScanMode

    public init(
        services: [BluetoothUUID]? = nil, allowDuplicates: Bool = false, rssiThreshold: Int16? = nil,
        mode: ScanMode = .active
    ) {
        self.services = services
        self.allowDuplicates = allowDuplicates
        self.rssiThreshold = rssiThreshold
        self.mode = mode
    }
}

/// How the radio scans: with scan requests (active: the scan responses too, e.g. a name sent
/// only there) or listening only (passive: no transmission, advertisements only).
public enum ScanMode: String, Sendable, Hashable {
    case active
    case passive
}
