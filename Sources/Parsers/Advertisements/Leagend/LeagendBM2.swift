import Bluetooth

/// Leagend BM2 car-battery monitor (Theengs `BM2_json.h`): an Apple iBeacon frame (manufacturer
/// id 0x004C, 23 bytes) with the fixed proximity UUID 655F83CA-AE16-A10A-702E-31F30D58DD82 whose
/// last byte (the measured-power position) is the battery level in %. The voltage the app shows
/// is only in the device's encrypted GATT notifications, not in the advertisement.
public struct LeagendBM2: AdvertisementParser {
    public init() {}
    public var format: String { "leagend_bm2" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x004C)] }

    static let prefix: [UInt8] = [
        0x02, 0x15, 0x65, 0x5F, 0x83, 0xCA, 0xAE, 0x16, 0xA1, 0x0A, 0x70, 0x2E, 0x31, 0xF3, 0x0D, 0x58, 0xDD, 0x82,
    ]

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count == 23, payload.starts(with: Self.prefix) else { return nil }
        var reader = ByteReader(payload, from: 22, what: "Leagend BM2")
        return [Reading(.battery, Double(try reader.u8()))]
    }
}
