import Bluetooth

/// Inkbird IBS-TH1, IBS-TH2, IBS-P01B, ITH-12S (local name `sps` or `tps`): the temperature is
/// the company-id field of the manufacturer data, int16 × 0.01 °C; the 7-byte payload holds
/// humidity uint16 LE × 0.01 % (`0000`/`FFFF` when the model has no humidity sensor), an
/// external-probe flag (byte 2, non-zero when a probe is plugged in), 2 bytes, battery % (byte 5),
/// and a final byte. Theengs decoder `IBS_THBP01B_json.h`; inkbird-ble.
public struct InkbirdIBSTH: AdvertisementParser {
    public init() {}
    public var format: String { "inkbird_ibs_th" }
    public var keys: [AdvertisementKey] { [] }
    public var acceptsAnyCompanyID: Bool { true }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard case .manufacturer(let company) = key, payload.count == 7,
            context.advertisement.localName == "sps" || context.advertisement.localName == "tps"
        else { return nil }
        var reader = ByteReader(payload, what: "Inkbird IBS-TH")
        let humidity = try reader.u16le()
        let probe = try reader.u8()
        try reader.skip(2)
        let battery = try reader.u8()
        var readings = [
            Reading(.temperature, decimal(Int16(bitPattern: company), 2)),
            Reading("external_probe", bool: probe != 0),
        ]
        if humidity != 0 && humidity != 0xFFFF { readings.append(Reading(.humidity, decimal(humidity, 2))) }
        // Theengs skips battery bytes E0–FF (not a percentage).
        if battery < 0xE0 { readings.append(Reading(.battery, Double(battery))) }
        return readings
    }
}
