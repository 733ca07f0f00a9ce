import Bluetooth

/// Govee H5074 / H5051 / H5052 / H5071 (govee-ble; Theengs `H5074_json.h`), manufacturer id
/// 0xEC88: `00`, temperature int16 LE × 0.01 °C, humidity uint16 LE × 0.01 %, battery u8 %.
/// Recognised by the local name, or without a name by its 7- or 9-byte length.
public struct GoveeH5074: AdvertisementParser {
    public init() {}
    public var format: String { "govee_h5074" }
    public var keys: [AdvertisementKey] { [.manufacturer(0xEC88)] }

    static func namesLittleEndianLayout(_ context: AdvertisementContext) -> Bool {
        context.nameContains("H5074") || context.nameContains("H5051") || context.nameContains("H5052")
            || context.nameContains("H5071")
    }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.first == 0 else { return nil }
        let named = Self.namesLittleEndianLayout(context)
        guard named || (context.advertisement.localName == nil && (payload.count == 7 || payload.count == 9)) else {
            return nil
        }
        return try goveeLittleEndian(payload, from: 1, what: "Govee H5074")
    }
}
