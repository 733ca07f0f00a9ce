import Bluetooth

/// Govee H5179 (govee-ble; Theengs `H5179_json.h`), manufacturer id 0x8801:
/// `EC 00 01 01`, temperature int16 LE × 0.01 °C, humidity uint16 LE × 0.01 %, battery u8 %.
public struct GoveeH5179: AdvertisementParser {
    public init() {}
    public var format: String { "govee_h5179" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x8801)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count >= 4, payload[0] == 0xEC, payload[1] == 0x00 else { return nil }
        return try goveeLittleEndian(payload, from: 4, what: "Govee H5179")
    }
}
