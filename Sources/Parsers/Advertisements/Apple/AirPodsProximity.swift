import Bluetooth

/// AirPods and Beats headphones: the Continuity "proximity pairing" message (manufacturer id
/// 0x004C), battery and charging state.
///
/// Payload, 27 bytes: `07 19 01`, model (2 bytes as sent, e.g. `0E 20` AirPods Pro), status
/// byte (bit 5 set: the first battery nibble is the right bud, else the left), buds' battery
/// byte (two nibbles), case byte (high nibble: charging flags, bit 1 the bud of the first
/// battery nibble, bit 0 the other, bit 2 the case; low nibble: case battery), lid byte,
/// colour byte, then encrypted bytes. A battery nibble is tens of percent (0-10); 15 means the
/// part is not connected and is published as `null`. AirPods Max (`0A 20`) have no buds or case
/// fields and only get `model` and `color`. Sources: Theengs decoder `APPLEAIRPODS_json.h` (field
/// positions, model and colour tables) and the AirBattery notes (15 = disconnected).
public struct AirPodsProximity: AdvertisementParser {
    public init() {}
    public var format: String { "airpods_proximity" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x004C)] }

    static let models: [UInt16: String] = [
        0x0220: "AirPods 1st gen.", 0x0F20: "AirPods 2nd gen.", 0x0E20: "AirPods Pro 1st gen.",
        0x1420: "AirPods Pro 2 Lightning", 0x2420: "AirPods Pro 2 USB-C", 0x0A20: "AirPods Max Lightning",
        0x0320: "Powerbeats³", 0x0520: "BeatsX", 0x0620: "Beats Solo³",
    ]
    static let colors = [
        "white", "black", "red", "blue", "pink", "gray", "silver", "gold", "rose gold", "space gray", "dark blue",
        "light blue", "yellow",
    ]

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count == 27 else { return nil }
        var reader = ByteReader(payload, what: "AirPods proximity pairing")
        guard try reader.u8() == 0x07, try reader.u8() == 0x19, try reader.u8() == 0x01 else { return nil }
        let model = try reader.u16be()
        let status = try reader.u8()
        let buds = try reader.u8()
        let caseByte = try reader.u8()
        try reader.skip(1)
        let color = Int(try reader.u8())
        var readings = [Reading("model", string: Self.models[model] ?? "model 0x\(String(model, radix: 16))")]
        if color < Self.colors.count {
            readings.append(Reading("color", string: Self.colors[color]))
        } else if color == 0x11 {
            readings.append(Reading("color", string: "green"))
        }
        guard model != 0x0A20 else { return readings }
        func level(_ nibble: UInt8) -> Double? { nibble <= 10 ? Double(nibble) * 10 : nil }
        let flipped = status & 0x20 != 0
        let first = buds >> 4
        let second = buds & 0x0F
        let charging = caseByte >> 4
        readings += [
            Reading(Quantity.battery.named("battery_right"), level(flipped ? first : second)),
            Reading(Quantity.battery.named("battery_left"), level(flipped ? second : first)),
            Reading(Quantity.battery.named("battery_case"), level(caseByte & 0x0F)),
            Reading("charging_right", bool: charging & (flipped ? 0x02 : 0x01) != 0, deviceClass: .batteryCharging),
            Reading("charging_left", bool: charging & (flipped ? 0x01 : 0x02) != 0, deviceClass: .batteryCharging),
            Reading("charging_case", bool: charging & 0x04 != 0, deviceClass: .batteryCharging),
        ]
        return readings
    }
}
