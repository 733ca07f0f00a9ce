import Bluetooth

/// Eddystone-EID frame (google/eddystone `eddystone-eid`), service data 0xFEAA, frame type
/// 0x30: tx power and an 8-byte ephemeral identifier (published as hex).
public struct EddystoneEID: AdvertisementParser {
    public init() {}
    public var format: String { "eddystone_eid" }
    public var keys: [AdvertisementKey] { [.serviceData(0xFEAA)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.first == 0x30 else { return nil }
        var reader = ByteReader(payload, from: 1, what: "Eddystone-EID")
        let power = try reader.s8()
        let eid = try reader.bytes(8)
        return [Reading(.txPower, Double(power)), Reading("eid", string: Hex.encode(eid))]
    }
}
