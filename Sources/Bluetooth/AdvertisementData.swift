/// What one advertisement (or BlueZ's merged view of a device's advertisements) carries, in the
/// shape `org.bluez.Device1` exposes it: manufacturer data keyed by the 16-bit company id with
/// the id removed from the bytes, and service data keyed by UUID with the UUID removed.
public struct AdvertisementData: Sendable, Hashable {
    /// The complete or shortened local name.
    public var localName: String?
    /// Advertised service UUIDs (complete or incomplete lists).
    public var serviceUUIDs: [BluetoothUUID]
    /// Manufacturer-specific data by company id (Bluetooth Assigned Numbers 7), e.g. 0x0499 Ruuvi.
    public var manufacturerData: [UInt16: [UInt8]]
    /// Service data by service UUID, e.g. `FCD2` for BTHome.
    public var serviceData: [BluetoothUUID: [UInt8]]
    /// Advertised TX power level in dBm.
    public var txPower: Int8?
    /// Received signal strength in dBm, as measured by the adapter.
    public var rssi: Int16?

    public init(
        localName: String? = nil,
        serviceUUIDs: [BluetoothUUID] = [],
        manufacturerData: [UInt16: [UInt8]] = [:],
        serviceData: [BluetoothUUID: [UInt8]] = [:],
        txPower: Int8? = nil,
        rssi: Int16? = nil
    ) {
        self.localName = localName
        self.serviceUUIDs = serviceUUIDs
        self.manufacturerData = manufacturerData
        self.serviceData = serviceData
        self.txPower = txPower
        self.rssi = rssi
    }

    /// True when nothing but signal data was received.
    public var isEmpty: Bool {
        localName == nil && serviceUUIDs.isEmpty && manufacturerData.isEmpty && serviceData.isEmpty
    }

    /// Merges a newer advertisement into this one the way BlueZ does: present fields replace,
    /// missing fields are kept, per-key data replaces per key.
    public mutating func merge(_ newer: AdvertisementData) {
        if let name = newer.localName { localName = name }
        for uuid in newer.serviceUUIDs where !serviceUUIDs.contains(uuid) { serviceUUIDs.append(uuid) }
        manufacturerData.merge(newer.manufacturerData) { _, new in new }
        serviceData.merge(newer.serviceData) { _, new in new }
        if let power = newer.txPower { txPower = power }
        if let rssi = newer.rssi { self.rssi = rssi }
    }
}
