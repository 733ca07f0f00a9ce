import Bluetooth

/// Humidity (0x2A6F): uint16 × 0.01 %, 0xFFFF unknown, above 100.00 prohibited (GSS `humidity`).
public struct Humidity: CharacteristicParser {
    public init() {}
    public var name: String { "humidity" }
    public var uuid: BluetoothUUID? { BluetoothUUID(0x2A6F) }

    public func decode(_ value: [UInt8]) throws(ParseError) -> [Reading] {
        guard value.count == 2 else { throw .length("Humidity", expected: 2, got: value.count) }
        var reader = ByteReader(value)
        let raw = try reader.u16le()
        if raw == 0xFFFF { return [Reading(.humidity, nil)] }
        guard raw <= 10000 else { throw ParseError(.prohibitedValue, "Humidity \(decimal(raw, 2)) % is above 100 %") }
        return [Reading(.humidity, decimal(raw, 2))]
    }
}
