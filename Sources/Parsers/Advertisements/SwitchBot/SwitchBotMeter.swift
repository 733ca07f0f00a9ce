import Bluetooth

/// SwitchBot Meter Plus (W230150X, name `WoSensorTH…`) and Outdoor Meter (W340001X, name
/// `WoIOSensorTH`) manufacturer data, company id 0x0969: the MAC (6 bytes), 2 bytes, then byte 8
/// bits 0–3 tenths of a degree, byte 9 bit 7 set for ≥ 0 °C and bits 0–6 whole degrees, byte 10
/// bits 0–6 humidity %; 11 bytes (Meter) or 12 (Outdoor Meter). Theengs decoder `SBMT_json.h`,
/// `SBOT_json.h`. Claimed by name only; with the meter's service data in the same advertisement
/// ``SwitchBotServiceData`` decodes first and adds the battery.
public struct SwitchBotMeter: AdvertisementParser {
    public init() {}
    public var format: String { "switchbot_meter" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x0969)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        let name = context.advertisement.localName ?? ""
        let meter = name.hasPrefix("WoSensorTH") && payload.count == 11
        let outdoor = name.hasPrefix("WoIOSensorTH") && payload.count == 12
        guard meter || outdoor else { return nil }
        return try Self.climate(payload)
    }

    /// Temperature and humidity from bytes 8–10 of the meters' manufacturer data.
    static func climate(_ payload: [UInt8]) throws(ParseError) -> [Reading] {
        var reader = ByteReader(payload, from: 8, what: "SwitchBot meter manufacturer data")
        let tenths = try reader.u8() & 0x0F
        let degrees = try reader.u8()
        let humidity = try reader.u8() & 0x7F
        return [Reading(.temperature, switchBotTemperature(degrees, tenths)), Reading(.humidity, Double(humidity))]
    }
}
