import Bluetooth

/// NodOn NIU smart button, service data 0x0000, 16 bytes: bytes 10–11 the case colour
/// (BE: 2 White, 3 TechBlue, 4 CozyGrey, 5 Wazabi, 6 Lagoon, 7 Softberry), byte 12 battery %
/// (bits 0–6), byte 15 the event (1 single, 2 double, 3 long press, 4 release, 5 triple,
/// 6 quadruple, 7 quintuple click). Layout and codes: Theengs decoder `devices/NODONNIU_json.h`
/// and its NODONNIU device page.
public struct NodOnNIU: AdvertisementParser {
    public init() {}
    public var format: String { "nodon_niu" }
    public var keys: [AdvertisementKey] { [.serviceData(0x0000)] }

    static let colors: [UInt16: String] = [
        2: "White", 3: "TechBlue", 4: "CozyGrey", 5: "Wazabi", 6: "Lagoon", 7: "Softberry",
    ]
    static let events: [UInt8: String] = [
        1: "press", 2: "double_press", 3: "long_press", 4: "release", 5: "triple_press", 6: "quadruple_press",
        7: "quintuple_press",
    ]

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count == 16 else { return nil }
        var reader = ByteReader(payload, from: 10, what: "NodOn NIU")
        let color = try reader.u16be()
        let battery = try reader.u8()
        try reader.skip(2)
        let event = try reader.u8()
        guard let colorName = Self.colors[color] else { return nil }
        var readings = [Reading("color", string: colorName), Reading(.battery, Double(battery & 0x7F))]
        if let name = Self.events[event] { readings.append(Reading("button", string: name)) }
        return readings
    }
}
