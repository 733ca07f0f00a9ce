import Bluetooth

/// Tilt hydrometer (all colours), an iBeacon (manufacturer 0x004C, `02 15`) whose proximity UUID
/// is `A495BB<c>0-C5B1-4B44-B512-1370F02D74DE`, `<c>` the colour (1 red, 2 green, 3 black,
/// 4 purple, 5 orange, 6 blue, 7 yellow, 8 pink); major = temperature in whole °F, minor =
/// specific gravity × 1000, power byte = tx power (int8 dBm). A Tilt Pro (high resolution)
/// sends minor ≥ 5000: major = tenths of °F, minor = specific gravity × 10000 (as tilt-ble
/// reads it). Layout: Theengs decoder
/// `devices/TILT_json.h`. Published as `temperature` in °C (converted), `specific_gravity`,
/// `color` and `tx_power`.
public struct TiltHydrometer: AdvertisementParser {
    public init() {}
    public var format: String { "tilt" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x004C)] }

    static let colors: [UInt8: String] = [
        0x10: "red", 0x20: "green", 0x30: "black", 0x40: "purple", 0x50: "orange", 0x60: "blue", 0x70: "yellow",
        0x80: "pink",
    ]
    static let uuidHead: [UInt8] = [0xA4, 0x95, 0xBB]
    static let uuidTail: [UInt8] = [0xC5, 0xB1, 0x4B, 0x44, 0xB5, 0x12, 0x13, 0x70, 0xF0, 0x2D, 0x74, 0xDE]

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard let frame = try IBeaconFrame(payload), frame.uuidHasPrefix(Self.uuidHead),
            frame.uuidHasPrefix(Self.uuidTail, from: 4), let color = Self.colors[frame.uuidByte(3)]
        else { return nil }
        let pro = frame.minor >= 5000
        let fahrenheit = Double(frame.major) / (pro ? 10 : 1)
        return [
            Reading("color", string: color),
            Reading(.temperature, rounded((fahrenheit - 32) * 5 / 9, pro ? 3 : 2)),
            Reading(.specificGravity, decimal(frame.minor, pro ? 4 : 3)),
            Reading(.txPower, Double(Int8(bitPattern: frame.power))),
        ]
    }
}
