import Bluetooth
import Glibc

/// Ruuvi data format 6 (Ruuvi Air, docs.ruuvi.com "Data format 6"), manufacturer id 0x0499,
/// 20 bytes, big-endian: `06`, temperature int16 × 0.005 °C, humidity u16 × 0.0025 %, pressure
/// u16 + 50000 Pa, PM2.5 u16 × 0.1 µg/m³, CO₂ u16 ppm, VOC index and NOx index (8 high bits each;
/// the low bits are flags bits 6 and 7), luminosity u8 on a log scale (lux = e^(v·ln 65536/254) − 1),
/// sound average (8 high bits, low bit flags bit 4; dBA = v/5 + 18), sequence u8, flags u8, the
/// low three bytes of the MAC. All-ones fields are n/a (`null`). Also published: Ruuvi's indoor
/// air quality score, computed from CO₂ and PM2.5 as the Ruuvi app shows it.
public struct RuuviFormat6: AdvertisementParser {
    public init() {}
    public var format: String { "ruuvi_format6" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x0499)] }
    /// The measurement sequence (nil when the tag says it is not available).
    public func frameCounter(_ payload: [UInt8], readings: [Reading]) -> UInt32? {
        readings.frameCounter(named: "measurement_sequence")
    }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.first == 6 else { return nil }
        guard payload.count >= 20 else { throw .tooShort("Ruuvi format 6", need: 20, got: payload.count) }
        var reader = ByteReader(payload, from: 1, what: "Ruuvi format 6")
        let temperature = try reader.s16be()
        let humidity = try reader.u16be()
        let pressure = try reader.u16be()
        let pm25 = try reader.u16be()
        let co2 = try reader.u16be()
        let voc = try reader.u8(), nox = try reader.u8()
        let luminosity = try reader.u8()
        let sound = try reader.u8()
        let sequence = try reader.u8()
        let flags = try reader.u8()
        let pm25Value = pm25 == 0xFFFF ? nil : decimal(pm25, 1)
        let co2Value = co2 == 0xFFFF ? nil : Double(co2)
        let lux: Double? =
            switch luminosity {
            case 0xFF: nil
            case 0: 0
            default: (exp(Double(luminosity) * log(65536.0) / 254) - 1).rounded()
            }
        let soundRaw = Int(sound) << 1 | (flags & 0x10 == 0 ? 0 : 1)
        return [
            Reading(.temperature, temperature == Int16.min ? nil : decimal(Int(temperature) * 5, 3)),
            Reading(.humidity, humidity == 0xFFFF ? nil : decimal(Int(humidity) * 25, 4)),
            Reading(.pressure, pressure == 0xFFFF ? nil : decimal(Int(pressure) + 50000, 2)),
            Reading(.pm25, pm25Value),
            Reading(.co2, co2Value),
            Reading(.vocIndex, ruuviIndex(voc, flags: flags, bit: 6)),
            Reading(.noxIndex, ruuviIndex(nox, flags: flags, bit: 7)),
            Reading(.illuminance, lux),
            Reading(.soundLevel, soundRaw == 0x1FF ? nil : decimal(soundRaw * 20 + 1800, 2)),
            Reading(.airQualityScore, ruuviAirQualityScore(co2: co2Value, pm25: pm25Value)),
            Reading(name: "measurement_sequence", value: .number(Double(sequence))),
        ]
    }
}
