import Bluetooth

/// Oral-B Bluetooth toothbrushes (Theengs `OralB_json.h`; the same fields in oralb-ble),
/// manufacturer id 0x00DC, at least 9 bytes: three bytes (protocol, model, firmware), state,
/// pressure (raw byte), brushing time minutes and seconds, mode, sector.
///
/// State: 1 initialising, 2 idle, 3 running, 4 charging, 0x73 sleeping. Mode (Smart/Genius
/// series numbering): 0 off, 1 daily clean, 2 sensitive, 3 massage, 4 whitening, 5 deep clean,
/// 6 tongue cleaning, 7 turbo. Sector 1–8. Other values give no reading for that field (iO
/// series brushes number their modes differently and are not told apart here).
public struct OralBToothbrush: AdvertisementParser {
    public init() {}
    public var format: String { "oralb" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x00DC)] }

    static let states: [UInt8: String] = [
        0x01: "initialising", 0x02: "idle", 0x03: "running", 0x04: "charging", 0x73: "sleeping",
    ]
    static let modes = [
        "off", "daily clean", "sensitive", "massage", "whitening", "deep clean", "tongue cleaning", "turbo",
    ]

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count >= 9 else { return nil }
        var reader = ByteReader(payload, from: 3, what: "Oral-B")
        let state = try reader.u8()
        let pressure = try reader.u8()
        let minutes = try reader.u8()
        let seconds = try reader.u8()
        let mode = try reader.u8()
        let sector = try reader.u8()
        var readings: [Reading] = []
        if let name = Self.states[state] { readings.append(Reading("state", string: name)) }
        if Int(mode) < Self.modes.count { readings.append(Reading("mode", string: Self.modes[Int(mode)])) }
        if (1...8).contains(sector) { readings.append(Reading("sector", Double(sector))) }
        readings.append(Reading("pressure", Double(pressure)))
        readings.append(
            Reading(
                name: "duration", value: .number(Double(minutes) * 60 + Double(seconds)), unit: "s",
                deviceClass: .duration))
        return readings
    }
}
