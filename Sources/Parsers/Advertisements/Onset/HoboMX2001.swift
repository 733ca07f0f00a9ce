import Bluetooth

/// Onset HOBO MX2001 water level logger, manufacturer 0x00C5, 20 bytes; bytes 16–19 are the
/// water level as float32 LE in metres, published as `water_level` in cm. The other bytes
/// (logger state, pressure and temperature channels) are not decoded. Recognised by company
/// id and length only, as Theengs does. Layout: Theengs decoder `devices/HOBOMX2001_json.h`.
public struct HoboMX2001: AdvertisementParser {
    public init() {}
    public var format: String { "hobo_mx2001" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x00C5)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count == 20 else { return nil }
        var reader = ByteReader(payload, from: 16, what: "HOBO MX2001")
        let metres = Float(bitPattern: try reader.u32le())
        return [Reading(.waterLevel, metres.isFinite ? rounded(Double(metres) * 100, 2) : nil)]
    }
}
