import Bluetooth

/// Temperature Measurement (0x2A1C), Health Thermometer Service / GSS `temperature_measurement`.
///
/// Flags: bit 0 Fahrenheit, bit 1 Time Stamp, bit 2 Temperature Type. The temperature is an
/// IEEE-11073 FLOAT published in the unit the device sent (`°C` or `°F`); specials give `null`
/// plus `temperature_special`.
public struct TemperatureMeasurement: CharacteristicParser {
    public init() {}
    public var name: String { "temperature_measurement" }
    public var uuid: BluetoothUUID? { BluetoothUUID(0x2A1C) }

    public func decode(_ value: [UInt8]) throws(ParseError) -> [Reading] {
        var reader = ByteReader(value, what: "Temperature Measurement")
        let flags = try reader.u8()
        let temperature = try reader.medfloat()
        var readings: [Reading] = []
        readings.append(
            "temperature", temperature, unit: flags & 0x01 != 0 ? .fahrenheit : .celsius, deviceClass: .temperature)
        if flags & 0x02 != 0 {
            readings.append(Reading(name: "timestamp", value: .string(try reader.dateTime())))
        }
        if flags & 0x04 != 0 {
            readings.append(Reading("temperature_type", Double(try reader.u8())))
        }
        return readings
    }
}
