/// HHCC / VegTrug HHCCJCY10 ("pink" plant sensor): service data 0xFD50, 9 bytes, big-endian.
///
/// Layout: moisture u8 %, temperature s16 BE × 0.1 °C, illuminance u24 BE lx, battery u8 %,
/// conductivity u16 BE µS/cm. Sources: xiaomi-ble `_parse_hhcc`; Theengs decoder
/// `HHCCJCY10_json.h`.
public struct HHCCJCY10: AdvertisementParser {
    public init() {}
    public var format: String { "hhccjcy10" }
    public var keys: [AdvertisementKey] { [.serviceData(0xFD50)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count == 9 else { return nil }
        var reader = ByteReader(payload, what: "HHCCJCY10")
        let moisture = try reader.u8()
        let temperature = try reader.s16be()
        let illuminance = try reader.uintBE(3)
        let battery = try reader.u8()
        let conductivity = try reader.u16be()
        return [
            Reading(.temperature, decimal(temperature, 1)), Reading(.moisture, Double(moisture)),
            Reading(.illuminance, Double(illuminance)), Reading(.battery, Double(battery)),
            Reading(.conductivity, Double(conductivity)),
        ]
    }
}
