import Bluetooth

/// ThermoBeacon WS02 / WS08 thermo-hygrometers (Theengs `ThermoBeacon_json.h`), manufacturer id
/// 0x0010, 0x0011, 0x0015, 0x0018 or 0x001B (the id varies with the model, not an assigned
/// company). Both frames start with two bytes and the device address reversed (6 bytes; when
/// the advertiser's address is known it must match).
///
/// 18-byte frame: voltage uint16 LE mV, temperature int16 LE / 16 °C, humidity int16 LE / 16 %,
/// uptime uint32 LE s. 20-byte frame: maximum temperature int16 LE / 16 °C and the uptime it was
/// reached at (uint32 LE s), then the same for the minimum (`temperature_max`,
/// `temperature_max_time`, `temperature_min`, `temperature_min_time`).
public struct ThermoBeacon: AdvertisementParser {
    public init() {}
    public var format: String { "thermobeacon" }
    public var keys: [AdvertisementKey] {
        [
            .manufacturer(0x0010), .manufacturer(0x0011), .manufacturer(0x0015), .manufacturer(0x0018),
            .manufacturer(0x001B),
        ]
    }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count == 18 || payload.count == 20 else { return nil }
        var reader = ByteReader(payload, from: 2, what: "ThermoBeacon")
        let address = try reader.bytes(6)
        if let known = context.address, Array(address.reversed()) != known.octets { return nil }
        if payload.count == 18 {
            let millivolts = try reader.u16le()
            let temperature = try reader.s16le()
            let humidity = try reader.s16le()
            let uptime = try reader.u32le()
            return [
                Reading(.temperature, Double(temperature) / 16), Reading(.humidity, Double(humidity) / 16),
                Reading(.voltage, decimal(millivolts, 3)), Reading("uptime", Double(uptime), unit: .seconds),
            ]
        }
        let maximum = try reader.s16le()
        let maximumTime = try reader.u32le()
        let minimum = try reader.s16le()
        let minimumTime = try reader.u32le()
        return [
            Reading(Quantity.temperature.named("temperature_max"), Double(maximum) / 16),
            Reading("temperature_max_time", Double(maximumTime), unit: .seconds),
            Reading(Quantity.temperature.named("temperature_min"), Double(minimum) / 16),
            Reading("temperature_min_time", Double(minimumTime), unit: .seconds),
        ]
    }
}
