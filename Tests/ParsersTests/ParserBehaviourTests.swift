import Bluetooth
import Parsers
import Testing

@Suite("Parser building blocks")
struct ParserBehaviourTests {
    @Test(
        "IEEE-11073 SFLOAT and FLOAT decode the worked examples of docs/parsers.md (Byte formats)",
        arguments: [(UInt16(0x0079), 121.0), (0xF0A0, 16.0), (0xE0C8, 2.0), (0x0B2E, -1234.0)])
    func sfloat(_ raw: UInt16, _ value: Double) {
        #expect(IEEE11073.sfloat(raw) == .number(value))
    }

    @Test("IEEE-11073 specials are recognised before sign extension")
    func specials() {
        #expect(IEEE11073.sfloat(0x07FF) == .special(.nan))
        #expect(IEEE11073.sfloat(0x0802) == .special(.negativeInfinity))
        #expect(IEEE11073.float(0x0080_0000) == .special(.nres))
        #expect(IEEE11073.float(0xFF00_0172) == .number(37.0))
        #expect(IEEE11073.float(0xFEFF_FF9C) == .number(-1.0))
    }

    @Test("BTHome numbers repeated names per reading, dimmer steps included, also past 64 readings")
    func bthomeRepeatedNames() throws {
        func names(_ hex: String) throws -> [String] {
            let ad = AdvertisementData(serviceData: [BluetoothUUID(0xFCD2): [UInt8](hexString: hex)])
            return try ParserRegistry.builtIn.decode(AdvertisementContext(advertisement: ad)).readings.map(\.name)
        }
        // Two dimmers (0x3C) around a temperature (0x02) and two batteries (0x01 and 0x01).
        let expected = [
            "dimmer_1", "dimmer_steps_1", "temperature", "dimmer_2", "dimmer_steps_2", "battery_1", "battery_2",
        ]
        #expect(try names("40" + "3c0103" + "02c409" + "3c0205" + "0164" + "0132") == expected)
        // A long (extended advertising) payload: 70 temperatures, numbered past the 64 tags.
        let long = try names("40" + String(repeating: "02c409", count: 70))
        #expect(long.count == 70)
        #expect(long.first == "temperature_1")
        #expect(long[63] == "temperature_64")
        #expect(long.last == "temperature_70")
    }

    @Test("BTHome v2 encrypted frame decrypts with the bind key and fails cleanly without it")
    func bthomeEncrypted() throws {
        let payload = [UInt8](hexString: "41a47266c95f730011223378237214")
        let ad = AdvertisementData(serviceData: [BluetoothUUID(0xFCD2): payload])
        let address = BluetoothAddress("54:48:E6:8F:80:A5")
        let key = [UInt8](hexString: "231d39c1d7cc1ab1aee224cd096db932")
        let decoded = try ParserRegistry.builtIn.decode(
            AdvertisementContext(advertisement: ad, address: address, bindKey: key))
        #expect(decoded.format == "bthome_v2")
        #expect(decoded.readings.first { $0.name == "temperature" }?.value == .number(25.06))
        #expect(decoded.readings.first { $0.name == "encryption_counter" }?.value == .number(0x3322_1100))
        #expect(throws: ParseError.self) {
            try ParserRegistry.builtIn.decode(AdvertisementContext(advertisement: ad, address: address))
        }
        var wrong = key
        wrong[0] ^= 1
        let error = #expect(throws: ParseError.self) {
            try ParserRegistry.builtIn.decode(AdvertisementContext(advertisement: ad, address: address, bindKey: wrong))
        }
        #expect(error?.kind == .decryptionFailed)
    }

    @Test("an unknown advertisement is unknown_format, a plugin registered later takes precedence")
    func registry() throws {
        struct Plugin: AdvertisementParser {
            var format: String { "my_plugin" }
            var keys: [AdvertisementKey] { [.manufacturer(0x0499)] }
            func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext) throws(ParseError)
                -> [Reading]?
            {
                [Reading("length", Double(payload.count))]
            }
        }
        let ad = AdvertisementData(manufacturerData: [0x0499: [5, 1, 2]])
        let unknown = #expect(throws: ParseError.self) {
            try ParserRegistry.builtIn.decode(
                AdvertisementContext(advertisement: AdvertisementData(manufacturerData: [0x1234: [1]])))
        }
        #expect(unknown?.kind == .unknownFormat)
        var registry = ParserRegistry.builtIn
        registry.register(Plugin())
        #expect(try registry.decode(AdvertisementContext(advertisement: ad)).format == "my_plugin")
    }

    @Test("readings carry Home Assistant units and device classes")
    func units() throws {
        let readings = try ParserRegistry.builtIn.decode(characteristic: BluetoothUUID(0x2A6E), value: [0x29, 0x09])
        #expect(
            readings == [Reading(name: "temperature", value: .number(23.45), unit: "°C", deviceClass: .temperature)])
    }
}
