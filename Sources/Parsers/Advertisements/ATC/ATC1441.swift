import Bluetooth

/// ATC1441 custom firmware format (github.com/atc1441/ATC_MiThermometer), service data 0x181A,
/// 13 bytes: MAC (6, written order), temperature int16 BE × 0.1 °C, humidity u8 %, battery
/// u8 %, battery u16 BE mV, frame counter u8.
public struct ATC1441: AdvertisementParser {
    public init() {}
    public var format: String { "atc1441" }
    public var keys: [AdvertisementKey] { [.serviceData(0x181A)] }
    /// The frame counter (the last byte, published as `packet_id`).
    public func frameCounter(_ payload: [UInt8], readings: [Reading]) -> UInt32? { payload.last.map(UInt32.init) }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count == 13 else { return nil }
        var reader = ByteReader(payload, what: "ATC1441")
        let mac = try reader.address()
        let temperature = try reader.s16be()
        let humidity = try reader.u8()
        let battery = try reader.u8()
        let millivolts = try reader.u16be()
        let counter = try reader.u8()
        return [
            Reading(.temperature, decimal(temperature, 1)),
            Reading(.humidity, Double(humidity)),
            Reading(.battery, Double(battery)),
            Reading(.voltage, decimal(millivolts, 3)),
            Reading("packet_id", Double(counter)),
            Reading("mac", string: mac.description),
        ]
    }
}
