import Bluetooth

/// Battery Level (0x2A19): uint8 percent, 101-255 reserved (GSS `battery_level`).
public struct BatteryLevel: CharacteristicParser {
    public init() {}
    public var name: String { "battery_level" }
    public var uuid: BluetoothUUID? { BluetoothUUID(0x2A19) }

    public func decode(_ value: [UInt8]) throws(ParseError) -> [Reading] {
        guard value.count == 1 else { throw .length("Battery Level", expected: 1, got: value.count) }
        let level = value[0]
        guard level <= 100 else { throw ParseError(.reservedValue, "Battery Level \(level) is above 100 %") }
        return [Reading(.battery, Double(level))]
    }
}
