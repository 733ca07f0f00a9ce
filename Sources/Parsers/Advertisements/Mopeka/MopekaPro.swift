import Bluetooth

/// Mopeka Pro Check / Pro Universal and Lippert BottleCheck tank sensors (Theengs
/// `Mopeka_json.h`; mopeka-iot-ble), manufacturer id 0x0059 (Nordic's, so recognised by the
/// 10-byte length and the hardware id `03`, `06` or `0C` in byte 0).
///
/// Layout: hardware id, battery (low 7 bits / 32 V), temperature (low 7 bits − 40 °C; bit 7 the
/// sync button), uint16 LE: low 14 bits the echo time, top 2 bits the reading quality (0–3),
/// 3 bytes of the address, accelerometer x and y (int8, raw). The tank level is echo × (0.573045
/// − 0.002822 t − 0.00000535 t²) / 10 cm, t the raw temperature byte (low 7 bits), the
/// speed-of-sound polynomial for propane. Battery % = (V − 2.2) / 0.65 × 100, clamped to 0…100.
public struct MopekaPro: AdvertisementParser {
    public init() {}
    public var format: String { "mopeka_pro" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x0059)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count == 10, [0x03, 0x06, 0x0C].contains(payload[0]) else { return nil }
        var reader = ByteReader(payload, from: 1, what: "Mopeka")
        let volts = Double(try reader.u8() & 0x7F) / 32
        let temperatureByte = try reader.u8()
        let echo = try reader.u16le()
        try reader.skip(3)
        let x = try reader.s8()
        let y = try reader.s8()
        let raw = Double(temperatureByte & 0x7F)
        let coefficient = 0.573045 - 0.002822 * raw - 0.00000535 * raw * raw
        let battery = min(max((volts - 2.2) / 0.65 * 100, 0), 100)
        return [
            Reading(.temperature, raw - 40),
            Reading(
                name: "tank_level", value: .number(Double(echo & 0x3FFF) * coefficient / 10), unit: .centimetres,
                deviceClass: .distance),
            Reading("reading_quality", Double(echo >> 14)),
            Reading("sync_button", bool: temperatureByte & 0x80 != 0),
            Reading(.voltage, volts),
            Reading(.battery, battery),
            Reading("accelerometer_x", Double(x)),
            Reading("accelerometer_y", Double(y)),
        ]
    }
}
