import Bluetooth
import Parsers
import Testing

/// Apple Continuity messages we decode: the watch's lock state and AirPods batteries.
@Suite("Apple parsers")
struct AppleParserTests {
    static func decode(_ hex: String) throws -> DecodedAdvertisement {
        let ad = AdvertisementData(manufacturerData: [0x004C: [UInt8](hexString: hex)])
        return try ParserRegistry.builtIn.decode(AdvertisementContext(advertisement: ad))
    }

    static func value(_ decoded: DecodedAdvertisement, _ name: String) -> ReadingValue? {
        decoded.readings.first { $0.name == name }?.value
    }

    @Test("AirPods: status bit 5 swaps the buds' nibbles and charging bits; nibble 15 is null, not 100 %")
    func airPods() throws {
        let flipped = try Self.decode("0719010e2022f58f00000a7d9fff27234873d4305e0fed1b39e2b8")
        #expect(flipped.format == "airpods_proximity")
        #expect(Self.value(flipped, "model") == .string("AirPods Pro 1st gen."))
        #expect(Self.value(flipped, "color") == .string("white"))
        #expect(Self.value(flipped, "battery_left") == .number(50))
        #expect(Self.value(flipped, "battery_right") == .null)
        #expect(Self.value(flipped, "battery_case") == .null)
        // Not flipped (status 0x02): first nibble left; charging bit 1 goes with the first nibble.
        let plain = try Self.decode("0719010e2002862900000a7d9fff27234873d4305e0fed1b39e2b8")
        #expect(Self.value(plain, "battery_left") == .number(80))
        #expect(Self.value(plain, "battery_right") == .number(60))
        #expect(Self.value(plain, "battery_case") == .number(90))
        #expect(Self.value(plain, "charging_left") == .bool(true))
        #expect(Self.value(plain, "charging_right") == .bool(false))
    }

    @Test("Apple Watch: only the 0x18/0x98 flags of a 7-byte Nearby Info are claimed")
    func watch() throws {
        #expect(Self.value(try Self.decode("10050b982068dd"), "unlocked") == .bool(true))
        #expect(Self.value(try Self.decode("10050b182068dd"), "unlocked") == .bool(false))
        #expect(throws: ParseError.self) { try Self.decode("10050b1a2068dd") }
    }
}
