import Bluetooth

/// Temperature (0x2A6E): sint16 × 0.01 °C, 0x8000 unknown, below -273.15 prohibited
/// (GSS `temperature`).
public struct Temperature: CharacteristicParser {
    public init() {}
    public var name: String { "temperature" }
    public var uuid: BluetoothUUID? { BluetoothUUID(0x2A6E) }

    public func decode(_ value: [UInt8]) throws(ParseError) -> [Reading] {
        guard value.count == 2 else { throw .length("Temperature", expected: 2, got: value.count) }
        var reader = ByteReader(value)
        let raw = try reader.s16le()
        if raw == Int16.min { return [Reading(.temperature, nil)] }
        guard raw >= -27315 else {
            throw ParseError(.prohibitedValue, "Temperature \(decimal(raw, 2)) °C is below absolute zero")
        }
        return [Reading(.temperature, decimal(raw, 2))]
    }
}
