import Bluetooth

/// Govee H5100 / H5101 / H5102 / H5103 / H5104 / H5105 / H5108 / H5174 / H5177 / H5179-GV
/// (govee-ble; Theengs `H5102_json.h`), manufacturer id 0x0001: `01 01`, 3-byte BE packed
/// temperature/humidity, battery (bit 7 error). The H5106 air-quality monitor uses the same
/// header with a 4-byte value `temperature × 10^7 + humidity × 10^4 + PM2.5` and is recognised
/// by its name. The 8-byte form (H5108 and nameless: two more bytes after the battery) decodes the
/// same; an appended iBeacon frame is ignored. H5112 / H5140 / H5178 frames, which share the
/// header, are claimed first by their own parsers.
public struct GoveeH5101: AdvertisementParser {
    public init() {}
    public var format: String { "govee_h5101" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x0001)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count >= 6, payload[0] == 0x01, payload[1] == 0x01 else { return nil }
        var reader = ByteReader(payload, from: 2, what: "Govee H5101")
        var readings = [Reading].reserved()
        if context.nameContains("5106") {
            let raw = try reader.u32be()
            let negative = raw & 0x8000_0000 != 0
            let value = Int(raw & 0x7FFF_FFFF)
            readings.append(Reading(.temperature, Double(value / 1_000_000) / 10 * (negative ? -1 : 1)))
            readings.append(Reading(.humidity, Double(value % 1_000_000 / 1000) / 10))
            readings.append(Reading(.pm25, Double(value % 1000)))
            return readings
        }
        // A remote-probe frame of the H5178 (`01 01 01 …` with 9 bytes) is a different layout.
        guard goveeLength(payload) != 9 else { return nil }
        goveePacked(UInt32(truncatingIfNeeded: try reader.uintBE(3)), into: &readings)
        if goveeBattery(try reader.u8(), into: &readings) {
            readings[0].value = .null
            readings[1].value = .null
        }
        return readings
    }
}
