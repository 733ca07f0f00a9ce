import Bluetooth

/// A GATT characteristic of a connected device, named by its service and characteristic UUIDs.
public struct BLECharacteristic: Sendable, Hashable, CustomStringConvertible {
    public var service: BluetoothUUID
    public var uuid: BluetoothUUID
    public var properties: CharacteristicProperties

    public init(service: BluetoothUUID, uuid: BluetoothUUID, properties: CharacteristicProperties) {
        self.service = service
        self.uuid = uuid
        self.properties = properties
    }

    public var description: String { "\(service.shortDescription)/\(uuid.shortDescription)" }
}
