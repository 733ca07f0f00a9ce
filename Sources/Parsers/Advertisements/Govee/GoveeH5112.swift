import Bluetooth

/// Govee H5112 two-probe thermometer (govee-ble), manufacturer id 0x0001, recognised by a name
/// containing `5112`: `01 01`, 3-byte BE packed temperature/humidity, battery (bit 7 error),
/// a byte, then the probe id (`41` probe 1 with humidity, `82` probe 2, temperature only).
/// Readings are `temperature_probe_N`, `humidity_probe_1` and `battery`.
public struct GoveeH5112: AdvertisementParser {
    public init() {}
    public var format: String { "govee_h5112" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x0001)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard goveeLength(payload) == 8, payload[0] == 0x01, payload[1] == 0x01, context.nameContains("5112") else {
            return nil
        }
        var reader = ByteReader(payload, from: 2, what: "Govee H5112")
        let packed = UInt32(truncatingIfNeeded: try reader.uintBE(3))
        let batteryByte = try reader.u8()
        try reader.skip(1)
        let probe: Int
        switch try reader.u8() {
        case 0x41: probe = 1
        case 0x82: probe = 2
        case let other: throw ParseError(.unsupported, "Govee H5112 probe id 0x\(Hex.encode([other]))")
        }
        var values: [Reading] = []
        goveePacked(packed, into: &values)
        var readings = [Reading].reserved()
        let error = goveeBattery(batteryByte, into: &readings)
        var temperature = values[0]
        temperature.name = "temperature_probe_\(probe)"
        if error { temperature.value = .null }
        readings.insert(temperature, at: 0)
        if probe == 1 {
            var humidity = values[1]
            humidity.name = "humidity_probe_1"
            if error { humidity.value = .null }
            readings.insert(humidity, at: 1)
        }
        return readings
    }
}
