import Bluetooth

/// One advertisement report from a scan: who sent it and what it carried (RSSI and local name
/// are inside ``advertisement``).
public struct BLEDiscovery: Sendable, Hashable {
    public var address: BluetoothAddress
    public var advertisement: AdvertisementData
    /// Which of the gateway's adapters heard it: its index in `bluetooth.adapters` (0 with one).
    public var adapter: UInt8
    /// The report's AD bytes as the controller gave them (the kernel's management socket), for
    /// the raw radio (``BLEPort/scan(services:raw:_:)``); nil when not asked for or when the
    /// port has only BlueZ's merged D-Bus view (the bytes are then rebuilt from ``advertisement``).
    public var data: [UInt8]?
    /// Public or random (the raw radio, presence); nil when the port does not know it.
    public var addressType: BluetoothAddress.AddressType?

    public init(
        address: BluetoothAddress, advertisement: AdvertisementData, adapter: UInt8 = 0, data: [UInt8]? = nil,
        addressType: BluetoothAddress.AddressType? = nil
    ) {
        self.address = address
        self.advertisement = advertisement
        self.adapter = adapter
        self.data = data
        self.addressType = addressType
    }
}
