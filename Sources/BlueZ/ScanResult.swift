import Bluetooth

/// One discovery while scanning: a peripheral and BlueZ's current view of its advertisements.
///
/// BlueZ merges advertisements per device (manufacturer and service data by key, ids never
/// removed), so ``advertisementData`` is that merged view, not the last packet.
public struct ScanResult: Sendable, Hashable {
    /// The device.
    public var peripheral: Peripheral
    /// Local name, service UUIDs, manufacturer data by company id, service data by UUID, TX power
    /// and RSSI, as BlueZ reports them.
    public var advertisementData: AdvertisementData
    /// The RSSI of the latest report in dBm, nil when BlueZ has none (e.g. 127 "not available").
    public var rssi: Int16? { advertisementData.rssi }

    public init(peripheral: Peripheral, advertisementData: AdvertisementData) {
        self.peripheral = peripheral
        self.advertisementData = advertisementData
    }
}
