import Bluetooth

/// CSC Measurement (0x2A5B), Cycling Speed and Cadence Service / GSS `csc_measurement`.
///
/// Flags: bit 0 wheel data (uint32 revolutions + uint16 event time), bit 1 crank data (uint16
/// revolutions + uint16 event time). Event times are 1/1024 s and wrap every 64 s, so speed and
/// cadence need two notifications; this parser publishes the counters and times as sent.
public struct CSCMeasurement: CharacteristicParser {
    public init() {}
    public var name: String { "csc_measurement" }
    public var uuid: BluetoothUUID? { BluetoothUUID(0x2A5B) }

    public func decode(_ value: [UInt8]) throws(ParseError) -> [Reading] {
        var reader = ByteReader(value, what: "CSC Measurement")
        let flags = try reader.u8()
        var readings: [Reading] = []
        if flags & 0x01 != 0 {
            let revolutions = try reader.u32le()
            let time = try reader.u16le()
            readings.append(Reading("cumulative_wheel_revolutions", Double(revolutions)))
            readings.append(Reading("last_wheel_event_time_raw", Double(time), unit: .ticks1024))
            readings.append(Reading("last_wheel_event_time", Double(time) / 1024, unit: .seconds))
        }
        if flags & 0x02 != 0 {
            let revolutions = try reader.u16le()
            let time = try reader.u16le()
            readings.append(Reading("cumulative_crank_revolutions", Double(revolutions)))
            readings.append(Reading("last_crank_event_time_raw", Double(time), unit: .ticks1024))
            readings.append(Reading("last_crank_event_time", Double(time) / 1024, unit: .seconds))
        }
        return readings
    }
}
