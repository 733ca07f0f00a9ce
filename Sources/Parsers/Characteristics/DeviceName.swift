import Bluetooth

/// Device Name (0x2A00): utf8s of 0-248 bytes (Core spec Vol 3 Part C 12.1).
public struct DeviceName: CharacteristicParser {
    public init() {}
    public var name: String { "device_name" }
    public var uuid: BluetoothUUID? { BluetoothUUID(0x2A00) }

    public func decode(_ value: [UInt8]) throws(ParseError) -> [Reading] {
        guard value.count <= 248 else {
            throw ParseError(.length, "Device Name must be at most 248 bytes, got \(value.count)")
        }
        return [Reading("device_name", string: try utf8String(value, what: "Device Name"))]
    }
}
