import Bluetooth

/// Polar H10 heart-rate strap, manufacturer 0x006B, 4 bytes: 3 bytes not decoded, then the
/// heart rate in bpm (uint8). Layout: Theengs decoder `devices/PH10_json.h`.
public struct PolarH10: AdvertisementParser {
    public init() {}
    public var format: String { "polar_h10" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x006B)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count == 4 else { return nil }
        var reader = ByteReader(payload, from: 3, what: "Polar H10")
        return [Reading(.heartRate, Double(try reader.u8()))]
    }
}
