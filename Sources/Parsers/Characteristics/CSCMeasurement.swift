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
            Self.append(Double(revolutions), time: try reader.u16le(), Self.wheel, to: &readings)
        }
        if flags & 0x02 != 0 {
            let revolutions = try reader.u16le()
            Self.append(Double(revolutions), time: try reader.u16le(), Self.crank, to: &readings)
        }
        return readings
    }

    private typealias Names = (count: String, raw: String, seconds: String)
    private static let wheel: Names = (
        "cumulative_wheel_revolutions", "last_wheel_event_time_raw", "last_wheel_event_time"
    )
    private static let crank: Names = (
        "cumulative_crank_revolutions", "last_crank_event_time_raw", "last_crank_event_time"
    )

    /// The revolution count and the last event time, raw (1/1024 s) and in seconds, under `names`.
    private static func append(
        _ revolutions: Double, time: UInt16, _ names: Names,
        to readings: inout [Reading]
    ) {
        readings.append(Reading(names.count, revolutions))
        readings.append(Reading(names.raw, Double(time), unit: .ticks1024))
        readings.append(Reading(names.seconds, Double(time) / 1024, unit: .seconds))
    }
}
