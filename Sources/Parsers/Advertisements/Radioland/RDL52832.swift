import Bluetooth

/// Radioland RDL52832 sensor beacon (local name `RDL52832…`): service data 0x0318 (0x1803 on
/// some firmware), 16 bytes: temperature int16 BE / 256 °C, humidity uint16 BE / 256 %, then
/// for x, y and z four bytes each: sign (0 positive, 1 negative), whole g, tenths of g,
/// hundredths of g. The same advertisement carries a plain iBeacon, whose fields are added
/// when present. Layout: Theengs decoder `devices/RDL52832_json.h`.
public struct RDL52832: AdvertisementParser {
    public init() {}
    public var format: String { "rdl52832" }
    public var keys: [AdvertisementKey] { [.serviceData(0x0318), .serviceData(0x1803)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard context.advertisement.localName?.hasPrefix("RDL52832") == true else { return nil }
        guard payload.count == 16 else { throw .length("RDL52832 sensor data", expected: 16, got: payload.count) }
        var readings = [Reading].reserved()
        if let beacon = context.advertisement.manufacturerData[0x004C], let frame = try? IBeaconFrame(beacon) {
            readings = frame.readings()
        }
        var reader = ByteReader(payload, what: "RDL52832 sensor data")
        readings.append(Reading(.temperature, Double(try reader.s16be()) / 256))
        readings.append(Reading(.humidity, Double(try reader.u16be()) / 256))
        for quantity in [Quantity.accelerationX, .accelerationY, .accelerationZ] {
            let negative = try reader.u8() != 0
            let whole = Int(try reader.u8())
            let tenths = Int(try reader.u8())
            let hundredths = Int(try reader.u8())
            let value = decimal(whole * 100 + tenths * 10 + hundredths, 2)
            readings.append(Reading(quantity, negative ? -value : value))
        }
        return readings
    }
}
