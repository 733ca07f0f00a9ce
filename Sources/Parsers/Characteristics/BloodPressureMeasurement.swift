import Bluetooth

/// Blood Pressure Measurement (0x2A35), Blood Pressure Service / GSS
/// `blood_pressure_measurement`.
///
/// Flags: bit 0 kPa (else mmHg), bit 1 Time Stamp, bit 2 Pulse Rate, bit 3 User ID, bit 4
/// Measurement Status. Systolic, diastolic and mean arterial pressure are IEEE-11073 SFLOATs;
/// specials give `null` plus `<name>_special`.
public struct BloodPressureMeasurement: CharacteristicParser {
    public init() {}
    public var name: String { "blood_pressure_measurement" }
    public var uuid: BluetoothUUID? { BluetoothUUID(0x2A35) }

    public func decode(_ value: [UInt8]) throws(ParseError) -> [Reading] {
        var reader = ByteReader(value, what: "Blood Pressure Measurement")
        let flags = try reader.u8()
        let unit: ReadingUnit = flags & 0x01 != 0 ? .kilopascals : .millimetresOfMercury
        let systolic = try reader.sfloat()
        let diastolic = try reader.sfloat()
        let mean = try reader.sfloat()
        var readings: [Reading] = []
        readings.append("systolic", systolic, unit: unit, deviceClass: .pressure)
        readings.append("diastolic", diastolic, unit: unit, deviceClass: .pressure)
        readings.append("mean_arterial_pressure", mean, unit: unit, deviceClass: .pressure)
        if flags & 0x02 != 0 { readings.append(Reading(name: "timestamp", value: .string(try reader.dateTime()))) }
        if flags & 0x04 != 0 { readings.append("pulse_rate", try reader.sfloat(), unit: .bpm) }
        if flags & 0x08 != 0 { readings.append(Reading("user_id", Double(try reader.u8()))) }
        if flags & 0x10 != 0 { readings.append(Reading("measurement_status", Double(try reader.u16le()))) }
        return readings
    }
}
