import Bluetooth

/// Atomax Skale I/II coffee scale, manufacturer 0x81EF, 4 bytes: weight int16 LE × 0.1 g, then
/// 2 bytes not decoded. Published in g. Layout: Theengs decoder `devices/Skale_json.h`.
public struct Skale: AdvertisementParser {
    public init() {}
    public var format: String { "skale" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x81EF)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count == 4 else { return nil }
        var reader = ByteReader(payload, what: "Skale")
        return [Reading(.weightGrams, decimal(try reader.s16le(), 1))]
    }
}
