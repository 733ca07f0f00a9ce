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

    public init(services: [BluetoothUUID]? = nil, allowDuplicates: Bool = false, rssiThreshold: Int16? = nil) {
        self.services = services
        self.allowDuplicates = allowDuplicates
        self.rssiThreshold = rssiThreshold
    }
}
