/// Xiaomi Mi Body Composition Scale (XMTZC02HM, XMTZC05HM, NUN4049CN): service data 0x181B,
/// 13 bytes.
///
/// Layout: two control bytes — byte 0: bit 0 pounds, bit 2 object mode (else person); byte 1:
/// bit 1 impedance present, bit 5 stabilized, bit 6 catty/jin, bit 7 load removed — then year
/// u16 LE, month, day, hour, minute, second, impedance u16 LE (Ω), weight u16 LE (kg × 200,
/// lb × 100 or jin × 100). Published as ``MiScaleV1`` plus `impedance` when present. Sources:
/// xiaomi-ble `_parse_scale_v2`; Theengs decoder `XMTZC05HMKG_json.h` / `XMTZC05HMLB_json.h`.
public struct MiScaleV2: AdvertisementParser {
    public init() {}
    public var format: String { "mi_scale_v2" }
    public var keys: [AdvertisementKey] { [.serviceData(0x181B)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count == 13 else { return nil }
        var reader = ByteReader(payload, what: "Mi Body Composition Scale")
        let units = try reader.u8()
        let state = try reader.u8()
        try reader.skip(7)
        let impedance = try reader.u16le()
        let raw = try reader.u16le()
        var readings = MiScaleV1.readings(
            raw: raw, pounds: units & 0x01 != 0, catty: state & 0x40 != 0, stable: state & 0x20 != 0,
            object: units & 0x04 != 0, removed: state & 0x80 != 0)
        if state & 0x02 != 0 && impedance != 0 { readings.append(Reading(.impedance, Double(impedance))) }
        return readings
    }
}
