import Bluetooth

/// A GATT characteristic (`org.bluez.GattCharacteristic1`), as a value.
///
/// Identity is the peripheral, the service and characteristic UUIDs and the declaration handle
/// (from BlueZ's object path `serviceXXXX/charYYYY`); it stays valid across reconnections and
/// bluetoothd restarts while the peripheral's attribute table is unchanged. A characteristic can
/// also be named before it was discovered with ``init(peripheral:service:uuid:)`` (e.g. from a
/// configuration file); the manager then finds it by UUIDs.
public struct Characteristic: Sendable, Hashable, CustomStringConvertible {
    /// The peripheral's address.
    public var peripheral: BluetoothAddress
    /// The UUID of the service it belongs to.
    public var service: BluetoothUUID
    /// The characteristic UUID.
    public var uuid: BluetoothUUID
    /// Properties from BlueZ's `Flags` (empty for a characteristic named but not yet discovered).
    public var properties: CharacteristicProperties
    /// The declaration handle (from the object path), 0 when not discovered.
    public var handle: UInt16
    /// `serviceXXXX/charYYYY` below the device path, nil when not discovered.
    let relativePath: String?

    /// Names a characteristic by UUIDs, to be found on the peripheral when it is connected.
    public init(peripheral: BluetoothAddress, service: BluetoothUUID, uuid: BluetoothUUID) {
        self.peripheral = peripheral
        self.service = service
        self.uuid = uuid
        self.properties = []
        self.handle = 0
        self.relativePath = nil
    }

    init(
        peripheral: BluetoothAddress, service: BluetoothUUID, uuid: BluetoothUUID,
        properties: CharacteristicProperties, relativePath: String
    ) {
        self.peripheral = peripheral
        self.service = service
        self.uuid = uuid
        self.properties = properties
        self.relativePath = relativePath
        self.handle = UInt16(relativePath.suffix(4), radix: 16) ?? 0
    }

    /// Equal when peripheral, service, UUID and handle are (properties are a snapshot).
    public static func == (lhs: Characteristic, rhs: Characteristic) -> Bool {
        lhs.peripheral == rhs.peripheral && lhs.service == rhs.service && lhs.uuid == rhs.uuid
            && lhs.handle == rhs.handle
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(peripheral)
        hasher.combine(service)
        hasher.combine(uuid)
        hasher.combine(handle)
    }

    public var description: String {
        "characteristic \(uuid.shortDescription) of service \(service.shortDescription) on \(peripheral)"
    }
}
