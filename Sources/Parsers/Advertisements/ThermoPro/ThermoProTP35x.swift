import Bluetooth

/// ThermoPro TP357, TP357S, TP358, TP359, TP393 (and other `TP35…`/`TP39…` hygrometers): the
/// readings start in the company-id field of the manufacturer data. As bytes on air (company id
/// first, little-endian): `C2`, temperature int16 LE × 0.1 °C (bytes 1–2), humidity % (byte 3),
/// battery (byte 4, bits 0–1: 2 good, 1 or 0 low); `FF FF FF` in bytes 1–3 means no measurement. thermopro-ble `parser.py`, Theengs decoder
/// `TPTH_json.h`.
///
/// Recognised by a name starting `TP35` or `TP39` and `C2` as the low byte of the company id.
/// Publishes `battery_low` rather than a percentage: the two bits are a coarse level, not a %.
public struct ThermoProTP35x: AdvertisementParser {
    public init() {}
    public var format: String { "thermopro_tp35x" }
    public var keys: [AdvertisementKey] { [] }
    public var acceptsAnyCompanyID: Bool { true }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard case .manufacturer(let company) = key, company & 0xFF == 0xC2 else { return nil }
        let name = context.advertisement.localName ?? ""
        guard name.hasPrefix("TP35") || name.hasPrefix("TP39") else { return nil }
        var reader = ByteReader(payload, what: "ThermoPro TP35x")
        let low = try reader.u8()
        let humidity = try reader.u8()
        let battery = try reader.u8()
        let temperature = Int16(bitPattern: UInt16(low) << 8 | company >> 8)
        // The TP357S sends FF FF FF while it has no measurement (thermopro-ble).
        let valid = !(company >> 8 == 0xFF && low == 0xFF && humidity == 0xFF)
        return [
            Reading(.temperature, valid ? decimal(temperature, 1) : nil),
            Reading(.humidity, valid ? Double(humidity) : nil),
            Reading("battery_low", bool: battery & 0x03 < 2, deviceClass: .battery),
        ]
    }
}
