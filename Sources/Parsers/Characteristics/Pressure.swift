import Bluetooth

/// Pressure (0x2A6D): uint32 × 0.1 Pa (GSS `pressure`). Published as `pressure` in Pa, as
/// the characteristic defines it (advertisement formats publish hPa).
public struct Pressure: CharacteristicParser {
    public init() {}
    public var name: String { "pressure" }
    public var uuid: BluetoothUUID? { BluetoothUUID(0x2A6D) }

    public func decode(_ value: [UInt8]) throws(ParseError) -> [Reading] {
        guard value.count == 4 else { throw .length("Pressure", expected: 4, got: value.count) }
        var reader = ByteReader(value)
        let raw = try reader.u32le()
        return [Reading(name: "pressure", value: .number(decimal(raw, 1)), unit: .pascals, deviceClass: .pressure)]
    }
}
