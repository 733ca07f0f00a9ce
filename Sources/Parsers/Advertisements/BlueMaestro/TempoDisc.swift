import Bluetooth

/// Blue Maestro Tempo Disc, manufacturer 0x0133, big-endian. Byte 0 is the version: 0x0D
/// (1 in 1, 10 bytes), 0x16/0x17 (3 in 1, 14 bytes), 0x1B (4 in 1, 14 bytes); byte 1 battery
/// %, bytes 2–5 logging interval and record count (not decoded), temperature int16 × 0.1 °C;
/// then for 3 in 1 humidity uint16 × 0.1 % and dew point int16 × 0.1 °C, for 4 in 1 humidity
/// and pressure uint16 × 0.1 hPa. Layout: Theengs decoder `devices/BM1IN1_json.h`,
/// `BM3IN1_json.h`, `BM4IN1_json.h`. Version 0x08 (Temperature Sensor v8, at least 8 bytes) is
/// laid out as the 1 in 1. Tempo Disc Maxi (0x29 T, 0x2A TH, 0x2B THP), little-endian: battery
/// %, 13 bytes not decoded, temperature int16 × 0.01 °C, humidity int16 × 0.01 %, pressure
/// int32 × 0.01 hPa, then statistics (at least 17 / 19 / 23 bytes; layout as bluemaestro-ble
/// reads it, after the vendor's app). The Maxi sends no dew point.
public struct TempoDisc: AdvertisementParser {
    public init() {}
    public var format: String { "tempo_disc" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x0133)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard let version = payload.first else { return nil }
        if let readings = try Self.maxi(payload, version: version) { return readings }
        if version == 0x08 {
            guard payload.count >= 8 else { return nil }
            var reader = ByteReader(payload, from: 1, what: "Blue Maestro")
            let battery = try reader.u8()
            try reader.skip(4)
            return [Reading(.temperature, decimal(try reader.s16be(), 1)), Reading(.battery, Double(battery))]
        }
        let length: Int
        switch version {
        case 0x0D: length = 10
        case 0x16, 0x17, 0x1B: length = 14
        default: return nil
        }
        guard payload.count == length else { return nil }
        var reader = ByteReader(payload, from: 1, what: "Tempo Disc")
        let battery = try reader.u8()
        try reader.skip(4)
        var readings = [Reading(.temperature, decimal(try reader.s16be(), 1)), Reading(.battery, Double(battery))]
        if version != 0x0D {
            readings.append(Reading(.humidity, decimal(try reader.u16be(), 1)))
            if version == 0x1B {
                readings.append(Reading(.pressure, decimal(try reader.u16be(), 1)))
            } else {
                readings.append(Reading(.dewPoint, decimal(try reader.s16be(), 1)))
            }
        }
        return readings
    }

    /// Tempo Disc Maxi frames (0x29, 0x2A, 0x2B); nil for other versions or short frames.
    static func maxi(_ payload: [UInt8], version: UInt8) throws(ParseError) -> [Reading]? {
        let minimum: Int
        switch version {
        case 0x29: minimum = 17
        case 0x2A: minimum = 19
        case 0x2B: minimum = 23
        default: return nil
        }
        guard payload.count >= minimum else { return nil }
        var reader = ByteReader(payload, from: 1, what: "Tempo Disc Maxi")
        let battery = try reader.u8()
        try reader.skip(13)
        var readings = [Reading(.temperature, decimal(try reader.s16le(), 2)), Reading(.battery, Double(battery))]
        if version != 0x29 { readings.append(Reading(.humidity, decimal(try reader.s16le(), 2))) }
        if version == 0x2B {
            readings.append(Reading(.pressure, decimal(Int32(bitPattern: try reader.u32le()), 2)))
        }
        return readings
    }
}
