import Bluetooth

/// The vendor sensor frame KKM K6P/K9 and BlueCharm KSensor beacons send on the Eddystone UUID
/// 0xFEAA (frame type 0x21, not part of the Eddystone spec): `21 01 <length>`, battery mV
/// (u16 BE), temperature 8.8 signed fixed point °C, then by length: humidity 8.8 % (0x07),
/// acceleration x/y/z int16 BE mG (0x0B), or humidity and acceleration (0x0F).
public struct KKMSensorFrame: AdvertisementParser {
    public init() {}
    public var format: String { "kkm_sensor" }
    public var keys: [AdvertisementKey] { [.serviceData(0xFEAA)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count >= 3, payload[0] == 0x21, payload[1] == 0x01 else { return nil }
        let layout = payload[2]
        guard layout == 0x07 || layout == 0x0B || layout == 0x0F else { return nil }
        var reader = ByteReader(payload, from: 3, what: "KKM sensor frame")
        let millivolts = try reader.u16be()
        let temperature = try reader.s16be()
        var readings = [Reading].reserved(6)
        readings.append(Reading(.voltage, decimal(millivolts, 3)))
        readings.append(Reading(.temperature, rounded(Double(temperature) / 256, 2)))
        if layout != 0x0B {
            readings.append(Reading(.humidity, rounded(Double(try reader.u16be()) / 256, 2)))
        }
        if layout != 0x07 {
            readings.append(Reading(.accelerationX, decimal(try reader.s16be(), 3)))
            readings.append(Reading(.accelerationY, decimal(try reader.s16be(), 3)))
            readings.append(Reading(.accelerationZ, decimal(try reader.s16be(), 3)))
        }
        return readings
    }
}
