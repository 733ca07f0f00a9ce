import Bluetooth

/// Heart Rate Measurement (0x2A37), Heart Rate Service 1.0 / GSS `heart_rate_measurement`.
///
/// Flags: bit 0 uint16 heart rate, bits 1-2 sensor contact, bit 3 Energy Expended (kJ),
/// bit 4 RR intervals (1/1024 s each, published raw and in seconds). An odd trailing RR byte is
/// malformed; the RR flag with no intervals is an empty list.
public struct HeartRateMeasurement: CharacteristicParser {
    public init() {}
    public var name: String { "heart_rate_measurement" }
    public var uuid: BluetoothUUID? { BluetoothUUID(0x2A37) }

    public func decode(_ value: [UInt8]) throws(ParseError) -> [Reading] {
        var reader = ByteReader(value, what: "Heart Rate Measurement")
        let flags = try reader.u8()
        let rate = flags & 0x01 != 0 ? Double(try reader.u16le()) : Double(try reader.u8())
        let contact: String = flags & 0x04 == 0 ? "not_supported" : (flags & 0x02 != 0 ? "detected" : "not_detected")
        var readings = [Reading(.heartRate, rate), Reading("sensor_contact", string: contact)]
        if flags & 0x08 != 0 {
            readings.append(
                Reading(
                    name: "energy_expended", value: .number(Double(try reader.u16le())), unit: .kilojoules,
                    deviceClass: .energy))
        }
        if flags & 0x10 != 0 {
            guard reader.remaining % 2 == 0 else {
                throw ParseError(.malformed, "Heart Rate Measurement RR-interval list has an odd trailing byte")
            }
            var raw: [Double] = []
            var seconds: [Double] = []
            while !reader.isAtEnd {
                let interval = try reader.u16le()
                raw.append(Double(interval))
                seconds.append(Double(interval) / 1024)
            }
            readings.append(Reading(name: "rr_intervals_raw", value: .numbers(raw), unit: .ticks1024))
            readings.append(Reading(name: "rr_intervals", value: .numbers(seconds), unit: .seconds))
        }
        return readings
    }
}
