import Bluetooth

/// Battery Level State (0x2A1B, deprecated; legacy GATT XML `battery_level_state`): uint8 level
/// and an 8-bit power state of four 2-bit fields (present, discharging, charging, level).
public struct BatteryLevelState: CharacteristicParser {
    public init() {}
    public var name: String { "battery_level_state" }
    public var uuid: BluetoothUUID? { BluetoothUUID(0x2A1B) }

    static let present = ["unknown", "not_supported", "not_present", "present"]
    static let discharging = ["unknown", "not_supported", "not_discharging", "discharging"]
    static let charging = ["unknown", "not_chargeable", "not_charging", "charging"]
    static let level = ["unknown", "not_supported", "good", "critically_low"]

    public func decode(_ value: [UInt8]) throws(ParseError) -> [Reading] {
        guard value.count == 2 else { throw .length("Battery Level State", expected: 2, got: value.count) }
        let level = value[0]
        guard level <= 100 else { throw ParseError(.reservedValue, "Battery Level \(level) is above 100 %") }
        let state = Int(value[1])
        return [
            Reading(.battery, Double(level)),
            Reading("present", string: Self.present[state & 3]),
            Reading("discharging", string: Self.discharging[(state >> 2) & 3]),
            Reading("charging", string: Self.charging[(state >> 4) & 3]),
            Reading("level", string: Self.level[(state >> 6) & 3]),
        ]
    }
}
