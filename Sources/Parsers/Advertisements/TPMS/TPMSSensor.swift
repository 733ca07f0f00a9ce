import Bluetooth

/// Generic BLE tyre-pressure sensors (Theengs `TPMS_json.h`; the 0x0100 "company id" is part of
/// the format, not an assigned id), 16 bytes: the sensor's own address (6 bytes, its low nibble
/// is the wheel: 0 → tyre 1), pressure uint32 LE in Pa (reported in bar), temperature int32 LE
/// × 0.01 °C, battery %, status byte (bit 0 alarm). Claimed when the first six bytes equal the
/// advertiser's address, or without an address from a device named `TPMS…`.
public struct TPMSSensor: AdvertisementParser {
    public init() {}
    public var format: String { "tpms" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x0100)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count == 16 else { return nil }
        if let address = context.address {
            guard payload.starts(with: address.octets) else { return nil }
        } else {
            guard context.advertisement.localName?.hasPrefix("TPMS") == true else { return nil }
        }
        var reader = ByteReader(payload, what: "TPMS")
        let wheel = try reader.u8() & 0x0F
        try reader.skip(5)
        let pressure = try reader.u32le()
        let temperature = try reader.intLE(4)
        let battery = try reader.u8()
        let status = try reader.u8()
        return [
            Reading("count", Double(wheel) + 1),
            Reading(name: "pressure", value: .number(decimal(pressure, 5)), unit: .bar, deviceClass: .pressure),
            Reading(.temperature, decimal(temperature, 2)),
            Reading(.battery, Double(battery)),
            Reading("alarm", bool: status & 0x01 != 0, deviceClass: .problem),
        ]
    }
}
