import Bluetooth

/// Govee H5140 CO₂ monitor (govee-ble), manufacturer id 0x0001, recognised by a name containing
/// `5140`: `01 01`, 3-byte BE packed temperature/humidity (see ``goveePacked(_:into:)``), CO₂
/// uint16 BE ppm, then an error byte (non-zero: all three values are unknown).
public struct GoveeH5140: AdvertisementParser {
    public init() {}
    public var format: String { "govee_h5140" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x0001)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard goveeLength(payload) == 8, payload[0] == 0x01, payload[1] == 0x01, context.nameContains("5140") else {
            return nil
        }
        var reader = ByteReader(payload, from: 2, what: "Govee H5140")
        var readings = [Reading].reserved()
        goveePacked(UInt32(truncatingIfNeeded: try reader.uintBE(3)), into: &readings)
        let co2 = try reader.u16be()
        let error = try reader.u8() != 0
        let valid = !error && readings[0].value != .null
        readings.append(Reading(.co2, valid ? Double(co2) : nil))
        if !valid {
            readings[0].value = .null
            readings[1].value = .null
        }
        return readings
    }
}
