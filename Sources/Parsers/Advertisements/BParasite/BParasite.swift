import Bluetooth

/// b-parasite soil sensor (rbaron), its own format on service data 0x181A, 16 bytes (18 with
/// the light sensor), big-endian: byte 0 high nibble = protocol version (1 or 2), bit 0 = has
/// illuminance; byte 1 counter; battery mV (uint16); temperature int16 (v1 × 0.001 °C, v2 ×
/// 0.01 °C); air humidity and soil moisture uint16 (× 100 / 65535 %); MAC (6); illuminance lx
/// (uint16, when flagged). Told apart from ATC1441 (13) and pvvx (15) by length. b-parasite
/// firmware that sends BTHome is handled by the BTHome parsers. Layout: Theengs decoder
/// `devices/BPARASITE_json.h`.
public struct BParasite: AdvertisementParser {
    public init() {}
    public var format: String { "b_parasite" }
    public var keys: [AdvertisementKey] { [.serviceData(0x181A)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count == 16 || payload.count == 18, let header = payload.first else { return nil }
        let version = header >> 4
        guard version == 1 || version == 2 else { return nil }
        let hasLight = header & 0x01 != 0
        guard !hasLight || payload.count == 18 else {
            throw .length("b-parasite frame with illuminance", expected: 18, got: payload.count)
        }
        var reader = ByteReader(payload, from: 2, what: "b-parasite")
        let millivolts = try reader.u16be()
        let temperature = try reader.s16be()
        let humidity = try reader.u16be()
        let moisture = try reader.u16be()
        let mac = try reader.address()
        var readings = [
            Reading(.temperature, decimal(temperature, version == 1 ? 3 : 2)),
            Reading(.humidity, rounded(Double(humidity) * 100 / 65535, 2)),
            Reading(.moisture, rounded(Double(moisture) * 100 / 65535, 2)),
            Reading(.voltage, decimal(millivolts, 3)),
            Reading("mac", string: mac.description),
        ]
        if hasLight { readings.append(Reading(.illuminance, Double(try reader.u16be()))) }
        return readings
    }
}
