import Bluetooth

/// SwitchBot devices' service data (UUID 0xFD3D, older firmware 0x0D00). Byte 0, bits 0–6, is the
/// model letter; byte 2, bits 0–6, the battery %. The rest per model (sources: SwitchBot's
/// `OpenWonderLabs/SwitchBotAPI-BLE` device pages, Theengs decoder `SBMT`, `SBOT`, `SBS1`, `SBCU`,
/// `SBMS`, `SBCS`, `SBBT` `_json.h`):
///
/// - `T`/`i` Meter / Meter Plus (THX1, W230150X), 6 bytes: byte 3 bits 0–3 tenths of a degree,
///   byte 4 bit 7 set for ≥ 0 °C and bits 0–6 whole degrees, byte 5 bits 0–6 humidity %.
/// - `w` Outdoor Meter (W340001X), 3 bytes: battery only; temperature and humidity are in the
///   0x0969 manufacturer data of the same advertisement (see ``SwitchBotMeter``), read from there.
/// - `H` Bot (X1), ≥ 3 bytes: byte 1 bit 7 switch mode (`on/off`, else `onestate` = press),
///   bit 6 set when off.
/// - `c` Curtain (5 or 6 bytes) / `{` Curtain 3 (6 bytes) (W070160X): byte 1 bit 6 calibrated,
///   byte 3 bit 7 moving and bits 0–6 position %, byte 4 bits 4–7 light level (1–10).
/// - `s` Motion Sensor (W110150X), 6 bytes: byte 1 bit 7 scope tested, bit 6 motion; byte 5
///   bit 5 LED, bits 2–3 sensing distance (0 long, 1 middle, 2 short), bit 1 light (dark/bright).
/// - `d` Contact Sensor (W120150X), 9 bytes: byte 1 bits 7/6 as the motion sensor; byte 3 bit 2
///   "timeout not closed", bit 1 open, bit 0 bright; byte 8 bits 6–7 entrance count, bits 4–5
///   exit count, bits 0–3 button-push count.
/// - `x` Blind Tilt (W270160X), 3 bytes: battery only; the state is in the 0x0969 manufacturer
///   data (MAC, then byte 7 bits 4–7 light level and bit 0 calibrated, byte 8 bit 7 moving and
///   bits 0–6 tilt position p: open % = 100 − |2p − 100|, direction up when p > 50, down when < 50).
public struct SwitchBotServiceData: AdvertisementParser {
    public init() {}
    public var format: String { "switchbot" }
    public var keys: [AdvertisementKey] { [.serviceData(0xFD3D), .serviceData(0x0D00)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        var reader = ByteReader(payload, what: "SwitchBot service data")
        guard payload.count >= 3 else { return nil }
        let model = try reader.u8() & 0x7F
        let status = try reader.u8()
        let battery = Reading(.battery, Double(try reader.u8() & 0x7F))
        switch (model, payload.count) {
        case (0x54, 6), (0x69, 6):  // Meter, Meter Plus
            let tenths = try reader.u8() & 0x0F
            let degrees = try reader.u8()
            let humidity = try reader.u8() & 0x7F
            return [
                Reading(.temperature, switchBotTemperature(degrees, tenths)), Reading(.humidity, Double(humidity)),
                battery,
            ]
        case (0x77, 3):  // Outdoor Meter
            var readings = [battery]
            if let meter = context.advertisement.manufacturerData[0x0969], meter.count == 12 {
                readings.insert(contentsOf: try SwitchBotMeter.climate(meter), at: 0)
            }
            return readings
        case (0x48, 3...):  // Bot
            return [
                Reading("mode", string: status & 0x80 != 0 ? "on/off" : "onestate"),
                Reading("state", string: status & 0x40 != 0 ? "off" : "on"), battery,
            ]
        case (0x63, 5), (0x63, 6), (0x7B, 6):  // Curtain, Curtain 3
            let position = try reader.u8()
            let light = try reader.u8() >> 4
            return [
                Reading("moving", bool: position & 0x80 != 0),
                Reading("position", Double(position & 0x7F), unit: .percent),
                Reading("calibrated", bool: status & 0x40 != 0), Reading("light_level", Double(light)), battery,
            ]
        case (0x73, 6):  // Motion Sensor
            try reader.skip(2)
            let sensor = try reader.u8()
            let distance = ["long", "middle", "short"]
            let code = Int(sensor >> 2 & 0x03)
            return [
                Reading("motion", bool: status & 0x40 != 0, deviceClass: .motion),
                Reading("scope_tested", bool: status & 0x80 != 0), Reading("led", bool: sensor & 0x20 != 0),
                code < distance.count
                    ? Reading("sensing_distance", string: distance[code])
                    : Reading(name: "sensing_distance", value: .null),
                Reading("light_level", string: sensor & 0x02 != 0 ? "bright" : "dark"), battery,
            ]
        case (0x64, 9):  // Contact Sensor
            let state = try reader.u8()
            try reader.skip(4)
            let counts = try reader.u8()
            let contact = state & 0x04 != 0 ? "timeout not closed" : state & 0x02 != 0 ? "open" : "closed"
            return [
                Reading("contact", string: contact), Reading("motion", bool: status & 0x40 != 0, deviceClass: .motion),
                Reading("light_level", string: state & 0x01 != 0 ? "bright" : "dark"),
                Reading("scope_tested", bool: status & 0x80 != 0), Reading("in_count", Double(counts >> 6)),
                Reading("out_count", Double(counts >> 4 & 0x03)), Reading("push_count", Double(counts & 0x0F)),
                battery,
            ]
        case (0x78, 3):  // Blind Tilt
            var readings = [battery]
            if let tilt = context.advertisement.manufacturerData[0x0969], tilt.count >= 9 {
                readings.insert(contentsOf: try blindTilt(tilt), at: 0)
            }
            return readings
        default:
            return nil
        }
    }

    /// The Blind Tilt's state from its 0x0969 manufacturer data (MAC first).
    func blindTilt(_ data: [UInt8]) throws(ParseError) -> [Reading] {
        var reader = ByteReader(data, from: 7, what: "SwitchBot Blind Tilt manufacturer data")
        let light = try reader.u8()
        let position = try reader.u8()
        let offset = 2 * Int(position & 0x7F) - 100
        let direction = offset > 0 ? "up" : offset < 0 ? "down" : "—"
        return [
            Reading("tilt", Double(abs(100 - abs(offset))), unit: .percent),
            Reading("tilt_direction", string: direction),
            Reading("moving", bool: position & 0x80 != 0), Reading("calibrated", bool: light & 0x01 != 0),
            Reading("light_level", Double(light >> 4)),
        ]
    }
}

/// SwitchBot's temperature: whole degrees in bits 0–6, bit 7 set for ≥ 0 °C, tenths apart.
func switchBotTemperature(_ degrees: UInt8, _ tenths: UInt8) -> Double {
    let magnitude = Double(degrees & 0x7F) + Double(tenths) / 10
    return degrees & 0x80 != 0 ? magnitude : -magnitude
}
