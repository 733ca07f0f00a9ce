import Bluetooth

/// pvvx custom format (github.com/pvvx/ATC_MiThermometer), service data 0x181A, 15 bytes:
/// MAC (6, reversed), temperature int16 LE × 0.01 °C, humidity u16 LE × 0.01 %, battery u16 LE
/// mV, battery u8 %, counter u8, flags u8. The encrypted variants (8 and 11 bytes) are
/// ``ATC1441Encrypted`` and ``PVVXEncrypted``.
public struct PVVXCustom: AdvertisementParser {
    public init() {}
    public var format: String { "pvvx" }
    public var keys: [AdvertisementKey] { [.serviceData(0x181A)] }
    /// The counter (byte 13, published as `packet_id`).
    public func frameCounter(_ payload: [UInt8], readings: [Reading]) -> UInt32? {
        payload.count == 15 ? UInt32(payload[13]) : nil
    }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count == 15 else { return nil }
        var reader = ByteReader(payload, what: "pvvx")
        let mac = try reader.addressLE()
        let temperature = try reader.s16le()
        let humidity = try reader.u16le()
        let millivolts = try reader.u16le()
        let battery = try reader.u8()
        let counter = try reader.u8()
        let flags = try reader.u8()
        return [
            Reading(.temperature, decimal(temperature, 2)),
            Reading(.humidity, decimal(humidity, 2)),
            Reading(.voltage, decimal(millivolts, 3)),
            Reading(.battery, Double(battery)),
            Reading("packet_id", Double(counter)),
            Reading("flags", Double(flags)),
            Reading("mac", string: mac.description),
        ]
    }
}
