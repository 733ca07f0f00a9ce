import Bluetooth

/// Ruuvi data format 3 "RAWv1" (ruuvi-sensor-protocols `dataformat_03.md`, deprecated),
/// manufacturer id 0x0499, 14 bytes: humidity u8 × 0.5 %, temperature as sign-magnitude
/// integer byte + hundredths byte, pressure u16 BE + 50000 Pa, acceleration int16 BE mG × 3,
/// battery u16 BE mV.
public struct RuuviRAWv1: AdvertisementParser {
    public init() {}
    public var format: String { "ruuvi_rawv1" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x0499)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.first == 3 else { return nil }
        guard payload.count >= 14 else { throw .tooShort("Ruuvi RAWv1", need: 14, got: payload.count) }
        var reader = ByteReader(payload, from: 1, what: "Ruuvi RAWv1")
        let humidity = try reader.u8()
        let whole = try reader.u8()
        let hundredths = try reader.u8()
        let pressure = try reader.u16be()
        let ax = try reader.s16be(), ay = try reader.s16be(), az = try reader.s16be()
        let millivolts = try reader.u16be()
        let magnitude = Int(whole & 0x7F) * 100 + Int(hundredths)
        return [
            Reading(.temperature, decimal(whole & 0x80 != 0 ? -magnitude : magnitude, 2)),
            Reading(.humidity, decimal(Int(humidity) * 5, 1)),
            Reading(.pressure, decimal(Int(pressure) + 50000, 2)),
            Reading(.accelerationX, decimal(ax, 3)),
            Reading(.accelerationY, decimal(ay, 3)),
            Reading(.accelerationZ, decimal(az, 3)),
            Reading(.voltage, decimal(millivolts, 3)),
        ]
    }
}
