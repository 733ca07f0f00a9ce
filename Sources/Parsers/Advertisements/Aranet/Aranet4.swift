import Bluetooth

/// Aranet4 CO₂ monitor with Smart Home integration on, manufacturer 0x0702, 22 bytes,
/// little-endian: 8 bytes of flags and firmware version (not decoded), CO₂ ppm (uint16, bit 15
/// = no value), temperature (uint16 × 0.05 °C, bit 14 = no value), pressure (uint16 × 0.1 hPa,
/// bit 15 = no value), humidity % (uint8), battery % (uint8), then status, interval, age and
/// counter (not decoded). Layout: Theengs decoder `devices/ARANET4_json.h`; the no-value bits
/// from the Aranet4-Python client.
public struct Aranet4: AdvertisementParser {
    public init() {}
    public var format: String { "aranet4" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x0702)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count == 22 else { return nil }
        var reader = ByteReader(payload, from: 8, what: "Aranet4")
        let co2 = try reader.u16le()
        let temperature = try reader.u16le()
        let pressure = try reader.u16le()
        let humidity = try reader.u8()
        let battery = try reader.u8()
        return [
            Reading(.temperature, temperature & 0x4000 == 0 ? rounded(Double(temperature) * 0.05, 2) : nil),
            Reading(.humidity, humidity & 0x80 == 0 ? Double(humidity) : nil),
            Reading(.pressure, pressure & 0x8000 == 0 ? decimal(pressure, 1) : nil),
            Reading(.co2, co2 & 0x8000 == 0 ? Double(co2) : nil),
            Reading(.battery, Double(battery & 0x7F)),
        ]
    }
}
