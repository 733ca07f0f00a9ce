import Bluetooth

/// Otio / BeeWi door & window sensor (BSDOO), manufacturer 0x000D (a Texas Instruments id other
/// devices share), 5 bytes: `08 0C`, state (bit 0 = open), 1 byte not decoded, battery %.
/// Recognised by the `08 0C` prefix and length. Layout: Theengs decoder `devices/BWBSDOO_json.h`.
public struct BeeWiDoorSensor: AdvertisementParser {
    public init() {}
    public var format: String { "beewi_door" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x000D)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count == 5, payload.starts(with: [0x08, 0x0C]) else { return nil }
        var reader = ByteReader(payload, from: 2, what: "BeeWi door sensor")
        let state = try reader.u8()
        try reader.skip(1)
        let battery = try reader.u8()
        return [Reading("window", bool: state & 0x01 != 0, deviceClass: .opening), Reading(.battery, Double(battery))]
    }
}
