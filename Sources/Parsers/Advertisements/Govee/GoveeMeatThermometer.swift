import Bluetooth

/// Govee H5181 / H5182 / H5183 / H5184 / H5185 / H5191 / H5198 meat thermometers (govee-ble).
/// Each model uses a few fixed values in the company-id field, which tell the model apart:
/// H5181 0xF861 / 0x388A / 0xEA42 / 0xAAA2 / 0xD14B, H5183 0x67DD / 0xE02F / 0xF79F (14 bytes),
/// H5182 0x2730, H5184 0x1B36 (17 bytes), H5185 0x4A32 / 0x0332 / 0x4C32, H5191 0xAC63,
/// H5198 0x3022 (20 bytes). An appended iBeacon frame is ignored.
///
/// Layout: a byte, `01 00 01 01`, a byte, probe group (H5184 / H5198: low 6 bits `1` probes 1–2,
/// `2` probes 3–4), a byte, then int16 BE values in 0.01 °C from byte 8: probe, alarm
/// (H5182 / H5184: probe, alarm, a byte, probe, alarm; H5185: probe, alarm, 2 bytes, probe,
/// alarm; H5191: probe, alarm, 2 bytes, ambient temperature; H5198: probe, high alarm, low alarm,
/// twice). As govee-ble does, a negative probe or alarm value (0xFFFF: no probe, no alarm set)
/// reads 0. Readings: `temperature_probe_N`, `temperature_alarm_probe_N`,
/// `low_temperature_alarm_probe_N`, and `temperature` (H5191).
public struct GoveeMeatThermometer: AdvertisementParser {
    public init() {}
    public var format: String { "govee_meat_thermometer" }

    enum Model { case h5181, h5182, h5183, h5184, h5185, h5191, h5198 }

    static let models: [(id: UInt16, model: Model, length: Int)] = [
        (0xF861, .h5181, 14), (0x388A, .h5181, 14), (0xEA42, .h5181, 14), (0xAAA2, .h5181, 14), (0xD14B, .h5181, 14),
        (0x2730, .h5182, 17), (0x67DD, .h5183, 14), (0xE02F, .h5183, 14), (0xF79F, .h5183, 14), (0x1B36, .h5184, 17),
        (0x4A32, .h5185, 20), (0x0332, .h5185, 20), (0x4C32, .h5185, 20), (0xAC63, .h5191, 20), (0x3022, .h5198, 20),
    ]

    public var keys: [AdvertisementKey] { Self.models.map { .manufacturer($0.id) } }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard case .manufacturer(let company) = key, let entry = Self.models.first(where: { $0.id == company }),
            goveeLength(payload) == entry.length
        else { return nil }
        var header = ByteReader(payload, from: 1, what: "Govee meat thermometer")
        guard try header.u32be() == 0x0100_0101 else { return nil }
        try header.skip(1)
        let group = try header.u8() & 0x3F
        var reader = ByteReader(payload, from: 8, to: entry.length, what: "Govee meat thermometer")
        var readings = [Reading].reserved()
        func probe(_ number: Int, low: Bool = false) throws(ParseError) {
            readings.append(Reading(Quantity.temperature.named("temperature_probe_\(number)"), try Self.value(&reader)))
            readings.append(
                Reading(Quantity.temperature.named("temperature_alarm_probe_\(number)"), try Self.value(&reader)))
            if low {
                readings.append(
                    Reading(
                        Quantity.temperature.named("low_temperature_alarm_probe_\(number)"), try Self.value(&reader))
                )
            }
        }
        func first() throws(ParseError) -> Int {
            switch group {
            case 1: return 1
            case 2: return 3
            default: throw ParseError(.unsupported, "Govee meat thermometer probe group \(group)")
            }
        }
        switch entry.model {
        case .h5181, .h5183:
            try probe(1)
        case .h5182:
            try probe(1)
            try reader.skip(1)
            try probe(2)
        case .h5184:
            let number = try first()
            try probe(number)
            try reader.skip(1)
            try probe(number + 1)
        case .h5185:
            try probe(1)
            try reader.skip(2)
            try probe(2)
        case .h5191:
            try probe(1)
            try reader.skip(2)
            readings.append(Reading(.temperature, decimal(try reader.s16be(), 2)))
        case .h5198:
            let number = try first()
            try probe(number, low: true)
            try probe(number + 1, low: true)
        }
        return readings
    }

    /// A probe or alarm temperature: int16 BE × 0.01 °C, negative (unset) as 0.
    static func value(_ reader: inout ByteReader) throws(ParseError) -> Double {
        let raw = try reader.s16be()
        return raw < 0 ? 0 : decimal(raw, 2)
    }
}
