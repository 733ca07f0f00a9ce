import Bluetooth

/// Ruuvi data format E1 "Extended v1" (Ruuvi Air, docs.ruuvi.com "Data format E1"), manufacturer
/// id 0x0499, 40 bytes, big-endian: `E1`, temperature int16 × 0.005 °C, humidity u16 × 0.0025 %,
/// pressure u16 + 50000 Pa, PM1.0/2.5/4.0/10 u16 × 0.1 µg/m³ each, CO₂ u16 ppm, VOC and NOx index
/// (8 high bits each, low bits in flags bits 6 and 7), luminosity u24 × 0.01 lx, 3 reserved
/// bytes, sequence u24, flags u8 (bit 0: calibration in progress), 5 reserved bytes, the MAC.
/// All-ones fields are n/a (`null`). Also published: Ruuvi's indoor air quality score.
public struct RuuviE1: AdvertisementParser {
    public init() {}
    public var format: String { "ruuvi_e1" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x0499)] }
    /// The measurement sequence (nil when the tag says it is not available).
    public func frameCounter(_ payload: [UInt8], readings: [Reading]) -> UInt32? {
        readings.frameCounter(named: "measurement_sequence")
    }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.first == 0xE1 else { return nil }
        guard payload.count >= 40 else { throw .tooShort("Ruuvi E1", need: 40, got: payload.count) }
        var reader = ByteReader(payload, from: 1, what: "Ruuvi E1")
        let temperature = try reader.s16be()
        let humidity = try reader.u16be()
        let pressure = try reader.u16be()
        var particles: [Double?] = []
        for _ in 0..<4 {
            let raw = try reader.u16be()
            particles.append(raw == 0xFFFF ? nil : decimal(raw, 1))
        }
        let co2 = try reader.u16be()
        let voc = try reader.u8(), nox = try reader.u8()
        let luminosity = try reader.uintBE(3)
        try reader.skip(3)
        let sequence = try reader.uintBE(3)
        let flags = try reader.u8()
        let co2Value = co2 == 0xFFFF ? nil : Double(co2)
        return [
            Reading(.temperature, temperature == Int16.min ? nil : decimal(Int(temperature) * 5, 3)),
            Reading(.humidity, humidity == 0xFFFF ? nil : decimal(Int(humidity) * 25, 4)),
            Reading(.pressure, pressure == 0xFFFF ? nil : decimal(Int(pressure) + 50000, 2)),
            Reading(.pm1, particles[0]), Reading(.pm25, particles[1]), Reading(.pm4, particles[2]),
            Reading(.pm10, particles[3]),
            Reading(.co2, co2Value),
            Reading(.vocIndex, ruuviIndex(voc, flags: flags, bit: 6)),
            Reading(.noxIndex, ruuviIndex(nox, flags: flags, bit: 7)),
            Reading(.illuminance, luminosity == 0xFF_FFFF ? nil : decimal(luminosity, 2)),
            Reading(.airQualityScore, ruuviAirQualityScore(co2: co2Value, pm25: particles[1])),
            Reading(name: "measurement_sequence", value: sequence == 0xFF_FFFF ? .null : .number(Double(sequence))),
            Reading("calibrating", bool: flags & 1 != 0),
        ]
    }
}
