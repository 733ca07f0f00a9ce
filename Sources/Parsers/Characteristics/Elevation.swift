import Bluetooth

/// Elevation (0x2A6C): sint24 × 0.01 m (GSS `elevation`); no special values.
public struct Elevation: CharacteristicParser {
    public init() {}
    public var name: String { "elevation" }
    public var uuid: BluetoothUUID? { BluetoothUUID(0x2A6C) }

    public func decode(_ value: [UInt8]) throws(ParseError) -> [Reading] {
        guard value.count == 3 else { throw .length("Elevation", expected: 3, got: value.count) }
        var reader = ByteReader(value)
        return [Reading(.elevation, decimal(try reader.intLE(3), 2))]
    }
}
