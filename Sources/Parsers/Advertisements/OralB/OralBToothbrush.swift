import Bluetooth

/// Oral-B Bluetooth toothbrushes (Theengs `OralB_json.h`; the same fields in oralb-ble),
/// manufacturer id 0x00DC, at least 9 bytes: three bytes (protocol, model, firmware), state,
/// pressure (raw byte), brushing time minutes and seconds, mode, sector; 11-byte frames add the
/// sector timer and the number of sectors.
///
/// State: 1 initialising, 2 idle, 3 running (`brushing` true), 4 charging, 5 setup, 6 flight
/// menu, 8 selection menu, 9 off, 10 post brushing statistics, 0x71 final test, 0x72 pcb test,
/// 0x73 sleeping, 0x74 transport. Mode, Smart/Genius series numbering: 0 off, 1 daily clean,
/// 2 sensitive, 3 massage, 4 whitening, 5 deep clean, 6 tongue cleaning, 7 turbo; iO series
/// (model byte 48–54): 0 daily clean, 1 sensitive, 2 gum care, 3 whiten, 4 intense, 5 super
/// sensitive, 6 tongue cleaning, 8 settings, 9 off, 11 smart adapt (the model ids and the iO
/// numbering as in oralb-ble). Sector 1–8. Other values give no reading for that field.
public struct OralBToothbrush: AdvertisementParser {
    public init() {}
    public var format: String { "oralb" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x00DC)] }

    static let states: [UInt8: String] = [
        0x01: "initialising", 0x02: "idle", 0x03: "running", 0x04: "charging", 0x05: "setup", 0x06: "flight menu",
        0x08: "selection menu", 0x09: "off", 0x0A: "post brushing statistics", 0x71: "final test", 0x72: "pcb test",
        0x73: "sleeping", 0x74: "transport",
    ]
    static let modes = [
        "off", "daily clean", "sensitive", "massage", "whitening", "deep clean", "tongue cleaning", "turbo",
    ]
    static let ioModes: [UInt8: String] = [
        0: "daily clean", 1: "sensitive", 2: "gum care", 3: "whiten", 4: "intense", 5: "super sensitive",
        6: "tongue cleaning", 8: "settings", 9: "off", 11: "smart adapt",
    ]

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count >= 9 else { return nil }
        let ioSeries = (48...54).contains(payload[1])
        var reader = ByteReader(payload, from: 3, what: "Oral-B")
        let state = try reader.u8()
        let pressure = try reader.u8()
        let minutes = try reader.u8()
        let seconds = try reader.u8()
        let mode = try reader.u8()
        let sector = try reader.u8()
        var readings = [Reading].reserved()
        if let name = Self.states[state] { readings.append(Reading("state", string: name)) }
        readings.append(Reading("brushing", bool: state == 0x03))
        if ioSeries {
            if let name = Self.ioModes[mode] { readings.append(Reading("mode", string: name)) }
        } else if Int(mode) < Self.modes.count {
            readings.append(Reading("mode", string: Self.modes[Int(mode)]))
        }
        if (1...8).contains(sector) { readings.append(Reading("sector", Double(sector))) }
        readings.append(Reading("pressure", Double(pressure)))
        readings.append(
            Reading(
                name: "duration", value: .number(Double(minutes) * 60 + Double(seconds)), unit: .seconds,
                deviceClass: .duration))
        if payload.count >= 11 {
            readings.append(Reading("sector_timer", Double(payload[9])))
            readings.append(Reading("number_of_sectors", Double(payload[10])))
        }
        return readings
    }
}
