import Bluetooth

/// Leagend BM6 car-battery monitor (Theengs `BM6_json.h`): an Apple iBeacon frame (manufacturer
/// id 0x004C, 23 bytes) with the fixed proximity UUID 3BA29CD9-A42C-8948-56BA-DAF2606EF777 whose
/// major's low byte (payload byte 19) is the battery level in %.
public struct LeagendBM6: AdvertisementParser {
    public init() {}
    public var format: String { "leagend_bm6" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x004C)] }

    static let prefix: [UInt8] = [
        0x02, 0x15, 0x3B, 0xA2, 0x9C, 0xD9, 0xA4, 0x2C, 0x89, 0x48, 0x56, 0xBA, 0xDA, 0xF2, 0x60, 0x6E, 0xF7, 0x77,
    ]

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count == 23, payload.starts(with: Self.prefix) else { return nil }
        var reader = ByteReader(payload, from: 19, what: "Leagend BM6")
        return [Reading(.battery, Double(try reader.u8()))]
    }
}
