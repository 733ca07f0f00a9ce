import Bluetooth
import Parsers
import Testing

@Suite("Ruuvi Air formats")
struct RuuviAirTests {
    func decode(_ hex: String) throws(ParseError) -> [String: ReadingValue] {
        let ad = AdvertisementData(manufacturerData: [0x0499: [UInt8](hexString: hex)])
        let decoded = try ParserRegistry.builtIn.decode(AdvertisementContext(advertisement: ad))
        return Dictionary(decoded.readings.map { ($0.name, $0.value) }, uniquingKeysWith: { a, _ in a })
    }

    @Test("format 6: every n/a field decodes to null, the score too; the sequence stays")
    func format6NotAvailable() throws {
        let readings = try decode(
            "06" + "8000" + "ffff" + "ffff" + "ffff" + "ffff" + "ff" + "ff" + "ff" + "ff" + "07" + "d0" + "aabbcc")
        for name in [
            "temperature", "humidity", "pressure", "pm25", "co2", "voc_index", "nox_index", "illuminance",
            "sound_level", "air_quality_score",
        ] {
            #expect(readings[name] == .null, "\(name)")
        }
        #expect(readings["measurement_sequence"] == .number(7))
    }

    @Test("format 6: the 9th bits of VOC and NOx come from the flags; the score follows CO₂ and PM2.5")
    func format6Bits() throws {
        // VOC 0x32 << 1 | 1 = 101, NOx 0 << 1 | 1 = 1 (flags 0xC0); CO₂ 420 and PM2.5 0: a score of 100.
        let readings = try decode(
            "06" + "0000" + "0000" + "0000" + "0000" + "01a4" + "32" + "00" + "00" + "00" + "01" + "c0" + "000000")
        #expect(readings["voc_index"] == .number(101))
        #expect(readings["nox_index"] == .number(1))
        #expect(readings["air_quality_score"] == .number(100))
        #expect(readings["illuminance"] == .number(0))
        #expect(readings["temperature"] == .number(0))
    }

    @Test("truncated Ruuvi Air frames are too short, not misread", arguments: ["06144e40f8c915", "e1170c5668c79e00"])
    func truncated(_ hex: String) {
        let error = #expect(throws: ParseError.self) { try decode(hex) }
        #expect(error?.kind == .tooShort)
    }
}
