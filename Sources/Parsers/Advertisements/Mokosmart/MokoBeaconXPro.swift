import Bluetooth

/// MOKO BeaconX Pro, service data 0xFEAB, big-endian; byte 0 is the frame type:
/// 0x40 device info (bytes 3–4 battery mV), 0x60 accelerometer (bytes 6–11 x, y, z int16 in
/// 0.1 mg — raw / 10000 g, bytes 12–13 battery mV), 0x70 temperature-humidity (bytes 3–4
/// temperature int16 × 0.1 °C, 5–6 humidity × 0.1 %, 7–8 battery mV). Other frame types are
/// not claimed. Layout: Theengs decoder `devices/MBXPRO_json.h`.
public struct MokoBeaconXPro: AdvertisementParser {
    public init() {}
    public var format: String { "moko_beaconx_pro" }
    public var keys: [AdvertisementKey] { [.serviceData(0xFEAB)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard let frame = payload.first else { return nil }
        var reader = ByteReader(payload, from: 3, what: "MOKO BeaconX Pro frame")
        switch frame {
        case 0x40:
            return [Reading(.voltage, decimal(try reader.u16be(), 3))]
        case 0x60:
            try reader.skip(3)
            var readings = [Reading].reserved()
            for quantity in [Quantity.accelerationX, .accelerationY, .accelerationZ] {
                readings.append(Reading(quantity, decimal(try reader.s16be(), 4)))
            }
            readings.append(Reading(.voltage, decimal(try reader.u16be(), 3)))
            return readings
        case 0x70:
            return [
                Reading(.temperature, decimal(try reader.s16be(), 1)),
                Reading(.humidity, decimal(try reader.u16be(), 1)),
                Reading(.voltage, decimal(try reader.u16be(), 3)),
            ]
        default:
            return nil
        }
    }
}
