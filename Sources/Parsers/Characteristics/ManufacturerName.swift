import Bluetooth

/// Manufacturer Name String (0x2A29): utf8s, may be empty (GSS `manufacturer_name_string`).
public struct ManufacturerName: CharacteristicParser {
    public init() {}
    public var name: String { "manufacturer_name" }
    public var uuid: BluetoothUUID? { BluetoothUUID(0x2A29) }

    public func decode(_ value: [UInt8]) throws(ParseError) -> [Reading] {
        [Reading("manufacturer_name", string: try utf8String(value, what: "Manufacturer Name String"))]
    }
}
