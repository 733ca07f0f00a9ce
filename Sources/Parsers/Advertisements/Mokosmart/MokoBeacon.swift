import Bluetooth

/// MOKO (Mokosmart) beacon, service data 0xFF01, 13 bytes: battery %, 6 bytes not decoded,
/// acceleration x, y, z as int16 BE in units of 0.1 mg (raw / 10000 g). Layout and scale:
/// Theengs decoder `devices/Mokobeacon_json.h` (the scale is Theengs'; we have no vendor
/// document for it).
public struct MokoBeacon: AdvertisementParser {
    public init() {}
    public var format: String { "moko_beacon" }
    public var keys: [AdvertisementKey] { [.serviceData(0xFF01)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count == 13 else { return nil }
        var reader = ByteReader(payload, what: "MOKO beacon")
        var readings = [Reading(.battery, Double(try reader.u8()))]
        try reader.skip(6)
        for quantity in [Quantity.accelerationX, .accelerationY, .accelerationZ] {
            readings.append(Reading(quantity, decimal(try reader.s16be(), 4)))
        }
        return readings
    }
}
