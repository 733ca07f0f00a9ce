import Bluetooth

/// April Brother ABTemp, an iBeacon (manufacturer 0x004C, `02 15`) with the fixed proximity UUID
/// `B5B182C7-EAB1-4988-AA99-B5C1517008D9`: major as usual, minor high byte = battery %, low
/// byte = temperature in whole °C (int8: a sensor below 0 °C sends two's complement, as Theengs
/// reads it; 0x80–0xFF as 128–255 °C is beyond any thermometer of this kind), power byte = tx
/// power. Layout: Theengs decoder `devices/ABTemp_json.h`.
public struct ABTemp: AdvertisementParser {
    public init() {}
    public var format: String { "abtemp" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x004C)] }

    static let uuid: [UInt8] = [
        0xB5, 0xB1, 0x82, 0xC7, 0xEA, 0xB1, 0x49, 0x88, 0xAA, 0x99, 0xB5, 0xC1, 0x51, 0x70, 0x08, 0xD9,
    ]

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard let frame = try IBeaconFrame(payload), frame.uuidHasPrefix(Self.uuid) else { return nil }
        var readings = frame.readings(minor: false)
        readings.append(Reading(.battery, Double(frame.minor >> 8)))
        readings.append(Reading(.temperature, Double(Int8(truncatingIfNeeded: frame.minor))))
        return readings
    }
}
