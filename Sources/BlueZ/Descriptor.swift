import Bluetooth

/// A GATT descriptor (`org.bluez.GattDescriptor1`), as a value. BlueZ exports no flags for
/// remote descriptors; the CCCD (0x2902) is managed by BlueZ and must not be written.
public struct Descriptor: Sendable, Hashable, CustomStringConvertible {
    /// The characteristic it belongs to.
    public var characteristic: Characteristic
    /// The descriptor UUID, e.g. 0x2901 (user description).
    public var uuid: BluetoothUUID
    /// `…/descZZZZ` below the device path.
    let relativePath: String
    /// The descriptor's ATT handle (from the object path's `descZZZZ`), 0 when it has none.
    public var handle: UInt16 { UInt16(relativePath.suffix(4), radix: 16) ?? 0 }

    init(characteristic: Characteristic, uuid: BluetoothUUID, relativePath: String) {
        self.characteristic = characteristic
        self.uuid = uuid
        self.relativePath = relativePath
    }

    public var description: String { "descriptor \(uuid.shortDescription) of \(characteristic)" }
}
