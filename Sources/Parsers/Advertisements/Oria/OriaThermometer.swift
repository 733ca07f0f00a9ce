import Bluetooth

/// Oria T201 / T301 thermo-hygrometers, manufacturer 0xAA55, big-endian: 2 header bytes, MAC
/// (6, written order), `01 07`, temperature int16 × 0.01 °C, humidity uint16 × 0.01 %, battery
/// %, then 2–3 bytes not decoded (17 bytes for T301, 18 for T201). Recognised by the local
/// name (`T201…`/`T301…`) or, without a name, by the `01 07` marker. Layout: Theengs decoder
/// `devices/T201_json.h`, `T301_json.h`.
public struct OriaThermometer: AdvertisementParser {
    public init() {}
    public var format: String { "oria" }
    public var keys: [AdvertisementKey] { [.manufacturer(0xAA55)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count >= 17 else { return nil }
        let name = context.advertisement.localName
        let named = name?.hasPrefix("T201") == true || name?.hasPrefix("T301") == true
        guard named || (name == nil && payload[8] == 0x01 && payload[9] == 0x07) else { return nil }
        var reader = ByteReader(payload, from: 2, what: "Oria thermometer")
        let mac = try reader.address()
        try reader.skip(2)
        let temperature = try reader.s16be()
        let humidity = try reader.u16be()
        let battery = try reader.u8()
        return [
            Reading(.temperature, decimal(temperature, 2)),
            Reading(.humidity, decimal(humidity, 2)),
            Reading(.battery, Double(battery)),
            Reading("mac", string: mac.description),
        ]
    }
}
