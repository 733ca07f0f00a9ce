import Bluetooth

/// Blue Maestro Tempo Disc, manufacturer 0x0133, big-endian. Byte 0 is the version: 0x0D
/// (1 in 1, 10 bytes), 0x16/0x17 (3 in 1, 14 bytes), 0x1B (4 in 1, 14 bytes); byte 1 battery
/// %, bytes 2–5 logging interval and record count (not decoded), temperature int16 × 0.1 °C;
/// then for 3 in 1 humidity uint16 × 0.1 % and dew point int16 × 0.1 °C, for 4 in 1 humidity
/// and pressure uint16 × 0.1 hPa. Layout: Theengs decoder `devices/BM1IN1_json.h`,
/// `BM3IN1_json.h`, `BM4IN1_json.h`.
public struct TempoDisc: AdvertisementParser {
    public init() {}
    public var format: String { "tempo_disc" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x0133)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard let version = payload.first else { return nil }
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
}
