import Bluetooth

/// Apple Watch lock state from the Continuity "Nearby Info" message (manufacturer id 0x004C).
///
/// Payload, 7 bytes: message type 0x10, length 0x05, status/action byte, data flags byte, 3
/// authentication-tag bytes. A watch sends data flags 0x98 while unlocked and 0x18 while locked
/// (bit 7); `unlocked` is published as a lock-class binary sensor (true = unlocked). Only these
/// two flag values are claimed, as Theengs decoder does (`APPLEWATCH_json.h`); other Nearby
/// Info senders (phones, Macs) and the rest of Continuity are left alone.
public struct AppleWatchNearby: AdvertisementParser {
    public init() {}
    public var format: String { "apple_watch_nearby" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x004C)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count == 7 else { return nil }
        var reader = ByteReader(payload, what: "Apple Nearby Info")
        guard try reader.u8() == 0x10, try reader.u8() == 0x05 else { return nil }
        try reader.skip(1)
        let flags = try reader.u8()
        guard flags & 0x7F == 0x18 else { return nil }
        return [Reading("unlocked", bool: flags & 0x80 != 0, deviceClass: .lock)]
    }
}
