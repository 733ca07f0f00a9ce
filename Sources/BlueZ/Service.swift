import Bluetooth

/// A GATT service of a peripheral (`org.bluez.GattService1`), as a value.
///
/// Identity is the peripheral, the UUID and the service's start handle (from BlueZ's object path
/// `serviceXXXX`), so it stays valid across reconnections and bluetoothd restarts as long as the
/// peripheral's attribute table does not change.
public struct Service: Sendable, Hashable, CustomStringConvertible {
    /// The peripheral's address.
    public var peripheral: BluetoothAddress
    /// The service UUID.
    public var uuid: BluetoothUUID
    /// True for a primary service.
    public var isPrimary: Bool
    /// The start handle (from the object path).
    public var handle: UInt16
    /// `serviceXXXX`, the last path component in BlueZ.
    let pathComponent: String

    init(peripheral: BluetoothAddress, uuid: BluetoothUUID, isPrimary: Bool, pathComponent: String) {
        self.peripheral = peripheral
        self.uuid = uuid
        self.isPrimary = isPrimary
        self.pathComponent = pathComponent
        self.handle = UInt16(pathComponent.suffix(4), radix: 16) ?? 0
    }

    public var description: String {
        "service \(uuid.shortDescription) (handle 0x\(String(handle, radix: 16))) of \(peripheral)"
    }
}
