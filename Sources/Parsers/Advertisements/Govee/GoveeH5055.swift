import Bluetooth

/// Govee H5055 six-probe BBQ thermometer (govee-ble `H5055`; Theengs `H5055_json.h`). The device
/// puts a varying value where the company id belongs, so the parser takes any manufacturer
/// payload (``AdvertisementParser/acceptsAnyCompanyID``) of 20 bytes ending `00 00` from a device
/// named `…5055…` or advertising service UUID 0x5550.
///
/// Layout: two bytes, battery (low 7 bits, %), probe byte (bits 7–6: `00` probes 1–2, `01`
/// probes 3–4, `10` probes 5–6), a byte, then for each of the two probes int16 LE °C:
/// temperature, low alarm, high alarm (a byte between the two probes). A temperature of 0xFFFF
/// means no probe (Theengs' rule; the low 6 bits of the probe byte, which govee-ble reads as a
/// connected-probe mask, are not used: Theengs' vectors report probes whose bit is clear); a
/// negative alarm is unset. Readings: `temperature_probe_N`, `low_temperature_alarm_probe_N`,
/// `temperature_alarm_probe_N`, `battery`.
public struct GoveeH5055: AdvertisementParser {
    public init() {}
    public var format: String { "govee_h5055" }
    public var keys: [AdvertisementKey] { [] }
    public var acceptsAnyCompanyID: Bool { true }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count == 20, payload[18] == 0, payload[19] == 0,
            context.nameContains("5055") || context.advertisement.serviceUUIDs.contains(where: { $0.uint16 == 0x5550 })
        else { return nil }
        var reader = ByteReader(payload, from: 2, what: "Govee H5055")
        let battery = try reader.u8() & 0x7F
        let first: Int
        switch try reader.u8() & 0xC0 {
        case 0x00: first = 1
        case 0x40: first = 3
        case 0x80: first = 5
        default: throw ParseError(.unsupported, "Govee H5055 probe group 3")
        }
        try reader.skip(1)
        var readings = [Reading].reserved()
        for number in [first, first + 1] {
            let temperature = try reader.s16le()
            let low = try reader.s16le()
            let high = try reader.s16le()
            if number == first { try reader.skip(1) }
            guard temperature != -1 else { continue }
            readings.append(Reading(Quantity.temperature.named("temperature_probe_\(number)"), Double(temperature)))
            if low >= 0 {
                readings.append(
                    Reading(Quantity.temperature.named("low_temperature_alarm_probe_\(number)"), Double(low)))
            }
            if high >= 0 {
                readings.append(Reading(Quantity.temperature.named("temperature_alarm_probe_\(number)"), Double(high)))
            }
        }
        readings.append(Reading(.battery, Double(battery)))
        return readings
    }
}
