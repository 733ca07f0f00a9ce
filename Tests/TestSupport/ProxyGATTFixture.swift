import Bluetooth
import ESPHomeAPI

/// The GATT layout the Bluetooth proxy's tests give a device: one service 180F (handle 0x0A)
/// with the battery level 2A19 (handle 0x0B: read, notify) and its CCCD (0x0D).
public enum ProxyGATTFixture {
    public static let batteryService = [
        GATTServiceInfo(
            uuid: BluetoothUUID(0x180F), handle: 0x0A,
            characteristics: [
                GATTCharacteristicInfo(
                    uuid: BluetoothUUID(0x2A19), handle: 0x0B, properties: 0x12,
                    descriptors: [(BluetoothUUID(0x2902), 0x0D)])
            ])
    ]
}
