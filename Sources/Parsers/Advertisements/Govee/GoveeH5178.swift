import Bluetooth

/// Govee H5178 / B5178 thermo-hygrometer with a remote sensor (govee-ble), manufacturer id
/// 0x0001, 9 bytes: `01 01`, sensor id (`01` the remote sensor, otherwise the base unit), 3-byte
/// BE packed temperature/humidity, battery (bit 7 error), two more bytes. The remote sensor's
/// readings are `temperature_remote`, `humidity_remote`, `battery_remote`.
public struct GoveeH5178: AdvertisementParser {
    public init() {}
    public var format: String { "govee_h5178" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x0001)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard goveeLength(payload) == 9, payload[0] == 0x01, payload[1] == 0x01 else { return nil }
        var reader = ByteReader(payload, from: 2, what: "Govee H5178")
        let remote = try reader.u8() == 0x01
        var readings = [Reading].reserved()
        goveePacked(UInt32(truncatingIfNeeded: try reader.uintBE(3)), into: &readings)
        if goveeBattery(try reader.u8(), into: &readings) {
            readings[0].value = .null
            readings[1].value = .null
        }
        if remote {
            for index in readings.indices { readings[index].name += "_remote" }
        }
        return readings
    }
}
