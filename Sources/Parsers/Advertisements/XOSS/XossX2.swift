import Bluetooth

/// XOSS X2 heart-rate sensor, manufacturer 0xFF04, 4 bytes: 1 byte not decoded, battery %
/// (bits 0–6), 1 byte not decoded, heart rate bpm (uint8). Layout: Theengs decoder
/// `devices/XOSSX2_json.h`.
public struct XossX2: AdvertisementParser {
    public init() {}
    public var format: String { "xoss_x2" }
    public var keys: [AdvertisementKey] { [.manufacturer(0xFF04)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count == 4 else { return nil }
        var reader = ByteReader(payload, from: 1, what: "XOSS X2")
        let battery = try reader.u8()
        try reader.skip(1)
        return [Reading(.heartRate, Double(try reader.u8())), Reading(.battery, Double(battery & 0x7F))]
    }
}
