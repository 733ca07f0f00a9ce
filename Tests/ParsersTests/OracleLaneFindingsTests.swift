import Bluetooth
import Parsers
import Testing

/// Parser fixes the oracle lane found (Tests/Oracles; docs/parsers.md, Oracle lane).
@Suite("Oracle lane findings")
struct OracleLaneFindingsTests {
    func decode(_ advertisement: AdvertisementData) throws(ParseError) -> DecodedAdvertisement {
        try ParserRegistry.builtIn.decode(AdvertisementContext(advertisement: advertisement))
    }

    func value(_ decoded: DecodedAdvertisement, _ name: String) -> ReadingValue? {
        decoded.readings.first { $0.name == name }?.value
    }

    @Test("ABTemp: the temperature byte is signed (−21 °C, not 235 °C)")
    func abtempBelowZero() throws {
        let frame = [UInt8](hexString: "0215b5b182c7eab14988aa99b5c1517008d97f564aebcb")
        let decoded = try decode(AdvertisementData(manufacturerData: [0x004C: frame]))
        #expect(decoded.format == "abtemp")
        #expect(value(decoded, "temperature") == .number(-21))
        #expect(value(decoded, "battery") == .number(74))
    }
}
