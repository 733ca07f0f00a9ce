import Bluetooth

/// One advertisement report from a scan: who sent it and what it carried (RSSI and local name
/// are inside ``advertisement``).
public struct BLEDiscovery: Sendable, Hashable {
    public var address: BluetoothAddress
    public var advertisement: AdvertisementData
    /// Which of the gateway's adapters heard it: its index in `bluetooth.adapters` (0 with one).
    public var adapter: UInt8

    public init(address: BluetoothAddress, advertisement: AdvertisementData, adapter: UInt8 = 0) {
        self.address = address
        self.advertisement = advertisement
        self.adapter = adapter
    }
}
