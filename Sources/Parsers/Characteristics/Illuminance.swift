import Bluetooth

/// Illuminance (0x2AFB): uint24 × 0.01 lx, 0xFFFFFF unknown (GSS `illuminance`).
public struct Illuminance: CharacteristicParser {
    public init() {}
    public var name: String { "illuminance" }
    public var uuid: BluetoothUUID? { BluetoothUUID(0x2AFB) }

    public func decode(_ value: [UInt8]) throws(ParseError) -> [Reading] {
        guard value.count == 3 else { throw .length("Illuminance", expected: 3, got: value.count) }
        var reader = ByteReader(value)
        let raw = try reader.u24le()
        if raw == 0xFF_FFFF { return [Reading(.illuminance, nil)] }
        return [Reading(.illuminance, decimal(raw, 2))]
    }
}
