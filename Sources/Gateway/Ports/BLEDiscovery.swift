import Bluetooth

/// One advertisement report from a scan: who sent it and what it carried (RSSI and local name
/// are inside ``advertisement``).
public struct BLEDiscovery: Sendable, Hashable {
    public var address: BluetoothAddress
    public var advertisement: AdvertisementData

    public init(address: BluetoothAddress, advertisement: AdvertisementData) {
        self.address = address
        self.advertisement = advertisement
    }
}
