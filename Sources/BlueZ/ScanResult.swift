import Bluetooth
import BluetoothManagement

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

    /// The kernel's report as received (AD bytes, address type, flags, controller), when it
    /// came from the management socket (``CentralOptions/reports`` `.kernel`); nil for a report
    /// of BlueZ's merged D-Bus view, whose bytes would have to be rebuilt from properties.
    public var kernelReport: DeviceFound?

    public init(peripheral: Peripheral, advertisementData: AdvertisementData, kernelReport: DeviceFound? = nil) {
        self.peripheral = peripheral
        self.advertisementData = advertisementData
        self.kernelReport = kernelReport
    }
}
