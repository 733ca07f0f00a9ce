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

    func mibeacon(_ hex: String) throws -> DecodedAdvertisement {
        let decoded = try decode(AdvertisementData(serviceData: [BluetoothUUID(0xFE95): [UInt8](hexString: hex)]))
        #expect(decoded.format == "mibeacon")
        return decoded
    }

    @Test("MiBeacon lock: Bluetooth key ids go up to 0x7FFFFFFF")
    func lockBluetoothKey() throws {
        // DSL-C08, object 0x000B: automatic / locked, key id 0x4C159D6A.
        let decoded = try mibeacon("5050800378fbb6c15453730b0009b16a9d154c71a7b503")
        #expect(value(decoded, "key_id") == .string("Bluetooth key 1276484970"))
        #expect(value(decoded, "lock_action") == .string("locked"))
        #expect(value(decoded, "lock_method") == .string("automatic"))
    }

    @Test("MiBeacon S400: weight bits all ones mean no weight (S400 Pro), so impedance alone is the high one")
    func s400NoWeight() throws {
        let decoded = try mibeacon("5050d930876857d0f16be2166e09a9ff07ec03158526d4")
        #expect(value(decoded, "weight") == nil)
        #expect(value(decoded, "impedance_high") == .number(25.1))
        #expect(value(decoded, "impedance_low") == nil)
        #expect(value(decoded, "stabilized") == .bool(true))
        #expect(value(decoded, "profile_id") == .number(169))
    }

    @Test("MiBeacon S200: a weight is final, so stabilized")
    func s200Stabilized() throws {
        let decoded = try mibeacon("5050c945dac1fd9306885c164e09dcef0900003853b6d6")
        #expect(value(decoded, "weight") == .number(25.43))
        #expect(value(decoded, "stabilized") == .bool(true))
    }

    @Test("MiBeacon DSL-C08 lock attribute: child lock is bit 3 alone, bits 4-7 reserved")
    func childLockBit() throws {
        let decoded = try mibeacon("505080035b5b730d8dd5a00e1001d4")
        #expect(value(decoded, "childlock") == .bool(true))
        #expect(value(decoded, "lock") == .bool(true))
        let set = try mibeacon("505080035b5b730d8dd5a00e100118")
        #expect(value(set, "childlock") == .bool(false))
    }
}
