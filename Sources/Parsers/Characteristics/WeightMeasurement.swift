import Bluetooth

/// Weight Measurement (0x2A9D), Weight Scale Service / GSS `weight_measurement`.
///
/// Flags: bit 0 imperial (lb / in instead of kg / m), bit 1 Time Stamp, bit 2 User ID, bit 3 BMI
/// and Height. Weight 0xFFFF is "measurement unsuccessful" (`null` plus `weight_special`).
public struct WeightMeasurement: CharacteristicParser {
    public init() {}
    public var name: String { "weight_measurement" }
    public var uuid: BluetoothUUID? { BluetoothUUID(0x2A9D) }

    public func decode(_ value: [UInt8]) throws(ParseError) -> [Reading] {
        var reader = ByteReader(value, what: "Weight Measurement")
        let flags = try reader.u8()
        let imperial = flags & 0x01 != 0
        let raw = try reader.u16le()
        let weightUnit: ReadingUnit = imperial ? .pounds : .kilograms
        var readings: [Reading] = []
        if raw == 0xFFFF {
            readings.append(Reading(name: "weight", value: .null, unit: weightUnit, deviceClass: .weight))
            readings.append(Reading("weight_special", string: "measurement_unsuccessful"))
        } else {
            let weight = imperial ? decimal(raw, 2) : decimal(Int(raw) * 5, 3)
            readings.append(Reading(name: "weight", value: .number(weight), unit: weightUnit, deviceClass: .weight))
        }
        if flags & 0x02 != 0 { readings.append(Reading(name: "timestamp", value: .string(try reader.dateTime()))) }
        if flags & 0x04 != 0 { readings.append(Reading("user_id", Double(try reader.u8()))) }
        if flags & 0x08 != 0 {
            let bmi = try reader.u16le()
            let height = try reader.u16le()
            readings.append(Reading("bmi", decimal(bmi, 1), unit: .kilogramsPerSquareMetre))
            readings.append(
                Reading(
                    name: "height", value: .number(imperial ? decimal(height, 1) : decimal(height, 3)),
                    unit: imperial ? "in" : "m", deviceClass: .distance))
        }
        return readings
    }
}
