import Bluetooth

/// Sensirion's BLE gadget advertisement (SHT4x / SHT40 gadget, MyCO₂ / SCD4x CO₂ gadget),
/// manufacturer id 0x06D5: `00` advertisement type, sample type, 2-byte device id, then raw
/// sensor words, uint16 little-endian (Theengs decoder `SHT4X_json.h`, `SCD4X_json.h`; conversions
/// from Sensirion's SHT4x and SCD4x datasheets):
///
/// - sample type `04` (`T_RH_V3`, SHT3x): temperature as below, humidity `100 · h / 65535` %
///   (Sensirion's `arduino-upt-core` `BLEProtocol.cpp`);
/// - sample type `06` (SHT4x): temperature `-45 + 175 · t / 65535` °C, humidity
///   `-6 + 125 · h / 65535` %;
/// - sample types `08`, `0A` (SCD4x): temperature as above, humidity `100 · h / 65535` %, then
///   CO₂ in ppm.
///
/// Values are rounded to 0.01. Bytes after these words (the gadget's name in some firmware, more samples in others) are ignored.
public struct SensirionGadget: AdvertisementParser {
    public init() {}
    public var format: String { "sensirion_gadget" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x06D5)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        var reader = ByteReader(payload, what: "Sensirion gadget")
        guard payload.count >= 2, try reader.u8() == 0 else { return nil }
        let sample = try reader.u8()
        guard [0x04, 0x06, 0x08, 0x0A].contains(sample) else { return nil }
        try reader.skip(2)
        let temperature = rounded(-45 + 175 * Double(try reader.u16le()) / 65535, 2)
        let rawHumidity = Double(try reader.u16le())
        guard sample != 0x06 else {
            return [Reading(.temperature, temperature), Reading(.humidity, rounded(-6 + 125 * rawHumidity / 65535, 2))]
        }
        guard sample != 0x04 else {
            return [Reading(.temperature, temperature), Reading(.humidity, rounded(100 * rawHumidity / 65535, 2))]
        }
        let co2 = try reader.u16le()
        return [
            Reading(.temperature, temperature), Reading(.humidity, rounded(100 * rawHumidity / 65535, 2)),
            Reading(.co2, Double(co2)),
        ]
    }
}
