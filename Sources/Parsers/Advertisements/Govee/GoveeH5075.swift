import Bluetooth

/// Govee H5072 / H5075 thermo-hygrometers (govee-ble; Theengs `H5072_json.h`), manufacturer
/// id 0xEC88: `00`, 3-byte BE packed temperature/humidity, battery (bit 7 error), `00`.
/// Claims 6-byte payloads (and 6 + appended iBeacon bytes) whose name is not an H5074-layout model.
public struct GoveeH5075: AdvertisementParser {
    public init() {}
    public var format: String { "govee_h5075" }
    public var keys: [AdvertisementKey] { [.manufacturer(0xEC88)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count == 6 || (payload.count > 6 && payload[6] == 0x4C), payload.first == 0,
            !GoveeH5074.namesLittleEndianLayout(context)
        else { return nil }
        var reader = ByteReader(payload, from: 1, what: "Govee H5075")
        let packed = UInt32(truncatingIfNeeded: try reader.uintBE(3))
        var readings = [Reading].reserved()
        goveePacked(packed, into: &readings)
        if goveeBattery(try reader.u8(), into: &readings) {
            readings[0].value = .null
            readings[1].value = .null
        }
        return readings
    }
}
