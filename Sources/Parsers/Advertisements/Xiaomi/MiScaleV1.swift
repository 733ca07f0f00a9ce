/// Xiaomi Mi Smart Scale (XMTZC01HM, XMTZC04HM): service data 0x181D, 10 bytes.
///
/// Layout: control byte (bit 0 pounds, bit 4 catty/jin, neither = kg; bit 5 stabilized; bit 6
/// object mode (else person); bit 7 load removed), weight u16 LE (kg × 200, lb × 100 or
/// jin × 100), then year u16 LE, month, day, hour, minute, second. Published: `weight` in kg
/// whatever the display unit, `weight_unit`, `weighing_mode`, and `stabilized` (stable, not
/// removed and not zero). Sources: xiaomi-ble `_parse_scale_v1`; Theengs decoder
/// `XMTZC04HMKG_json.h` / `XMTZC04HMLB_json.h` (weighing mode bit).
public struct MiScaleV1: AdvertisementParser {
    public init() {}
    public var format: String { "mi_scale_v1" }
    public var keys: [AdvertisementKey] { [.serviceData(0x181D)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count == 10 else { return nil }
        var reader = ByteReader(payload, what: "Mi Scale")
        let control = try reader.u8()
        let raw = try reader.u16le()
        return MiScaleV1.readings(
            raw: raw, pounds: control & 0x01 != 0, catty: control & 0x10 != 0, stable: control & 0x20 != 0,
            object: control & 0x40 != 0, removed: control & 0x80 != 0)
    }

    /// The readings both scale generations share.
    static func readings(raw: UInt16, pounds: Bool, catty: Bool, stable: Bool, object: Bool, removed: Bool)
        -> [Reading]
    {
        let kilograms: Double
        let unit: String
        if pounds {
            kilograms = Double(raw) * 0.0045359237
            unit = "lb"
        } else if catty {
            kilograms = Double(raw) * 0.005
            unit = "jin"
        } else {
            kilograms = Double(raw) / 200
            unit = "kg"
        }
        return [
            Reading(.weight, rounded(kilograms, 3)), Reading("weight_unit", string: unit),
            Reading("weighing_mode", string: object ? "object" : "person"),
            Reading("stabilized", bool: stable && !removed && raw != 0),
        ]
    }
}
