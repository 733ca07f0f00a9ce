import Bluetooth

/// Battery Level Status (0x2BED), Battery Service 1.1 / GSS `battery_level_status`.
///
/// Flags (identifier, level, additional status present), a 16-bit power state (battery present,
/// wired/wireless external power, charge state, charge level, charging type, charging faults),
/// then the optional fields in that order.
public struct BatteryLevelStatus: CharacteristicParser {
    public init() {}
    public var name: String { "battery_level_status" }
    public var uuid: BluetoothUUID? { BluetoothUUID(0x2BED) }

    static let external = ["no", "yes", "unknown", "reserved"]
    static let chargeState = ["unknown", "charging", "discharging_active", "discharging_inactive"]
    static let chargeLevel = ["unknown", "good", "low", "critical"]
    static let chargingType = [
        "unknown_or_not_charging", "constant_current", "constant_voltage", "trickle", "float",
        "reserved", "reserved", "reserved",
    ]
    static let serviceRequired = ["false", "true", "unknown", "reserved"]

    public func decode(_ value: [UInt8]) throws(ParseError) -> [Reading] {
        var reader = ByteReader(value, what: "Battery Level Status")
        let flags = try reader.u8()
        let state = Int(try reader.u16le())
        var readings: [Reading] = [
            Reading("battery_present", bool: state & 1 != 0),
            Reading("wired_external_power", string: Self.external[(state >> 1) & 3]),
            Reading("wireless_external_power", string: Self.external[(state >> 3) & 3]),
            Reading("charge_state", string: Self.chargeState[(state >> 5) & 3]),
            Reading("charge_level", string: Self.chargeLevel[(state >> 7) & 3]),
            Reading("charging_type", string: Self.chargingType[(state >> 9) & 7]),
            Reading("charging_fault_battery", bool: state & (1 << 12) != 0),
            Reading("charging_fault_external_power", bool: state & (1 << 13) != 0),
            Reading("charging_fault_other", bool: state & (1 << 14) != 0),
        ]
        if flags & 0x01 != 0 { readings.append(Reading("identifier", Double(try reader.u16le()))) }
        if flags & 0x02 != 0 {
            let level = try reader.u8()
            guard level <= 100 else { throw ParseError(.reservedValue, "Battery Level \(level) is above 100 %") }
            readings.append(Reading(.battery, Double(level)))
        }
        if flags & 0x04 != 0 {
            let status = Int(try reader.u8())
            readings.append(Reading("service_required", string: Self.serviceRequired[status & 3]))
            readings.append(Reading("battery_fault", bool: status & 4 != 0))
        }
        return readings
    }
}
