import Bluetooth

/// Eddystone-UID frame (google/eddystone `eddystone-uid`), service data 0xFEAA, frame type
/// 0x00: tx power (int8 dBm at 0 m), 10-byte namespace, 6-byte instance, 2 reserved bytes.
public struct EddystoneUID: AdvertisementParser {
    public init() {}
    public var format: String { "eddystone_uid" }
    public var keys: [AdvertisementKey] { [.serviceData(0xFEAA)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.first == 0x00 else { return nil }
        var reader = ByteReader(payload, from: 1, what: "Eddystone-UID")
        let power = try reader.s8()
        let namespace = try reader.bytes(10)
        let instance = try reader.bytes(6)
        return [
            Reading(.txPower, Double(power)), Reading("namespace", string: Hex.encode(namespace)),
            Reading("instance", string: Hex.encode(instance)),
        ]
    }
}
