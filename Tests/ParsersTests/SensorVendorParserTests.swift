import Bluetooth
import Parsers
import Retry
import Testing

/// SwitchBot, Qingping, Sensirion, ThermoPro and Inkbird: the cases the vectors do not pin down.
@Suite("SwitchBot, Qingping, Sensirion, ThermoPro, Inkbird parsers")
struct SensorVendorParserTests {
    static func decode(
        service: [UInt16: String] = [:], manufacturer: [UInt16: String] = [:], name: String? = nil,
        address: String? = nil
    ) throws(ParseError) -> DecodedAdvertisement {
        var ad = AdvertisementData(localName: name)
        for (uuid, hex) in service { ad.serviceData[BluetoothUUID(uuid)] = [UInt8](hexString: hex) }
        for (company, hex) in manufacturer { ad.manufacturerData[company] = [UInt8](hexString: hex) }
        return try ParserRegistry.builtIn.decode(
            AdvertisementContext(advertisement: ad, address: address.flatMap { BluetoothAddress($0) }))
    }

    static func value(_ decoded: DecodedAdvertisement, _ name: String) -> ReadingValue? {
        decoded.readings.first { $0.name == name }?.value
    }

    @Test("a parser that reads the company id gets every id, after the parsers registered for it")
    func anyCompanyRegistry() throws {
        struct CompanyEcho: AdvertisementParser {
            var format: String { "company_echo" }
            var keys: [AdvertisementKey] { [] }
            var acceptsAnyCompanyID: Bool { true }
            func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext) throws(ParseError)
                -> [Reading]?
            {
                guard case .manufacturer(let company) = key else { return nil }
                return [Reading("company", Double(company))]
            }
        }
        var registry = ParserRegistry.builtIn
        registry.register(CompanyEcho())
        let any = AdvertisementData(manufacturerData: [0x4321: [1, 2]])
        let decoded = try registry.decode(AdvertisementContext(advertisement: any))
        #expect(decoded.format == "company_echo")
        #expect(decoded.readings == [Reading("company", Double(0x4321))])
        // Ruuvi's own parser for 0x0499 claims its frame first.
        let ruuvi = AdvertisementData(manufacturerData: [0x0499: [UInt8](hexString: "03291A1ECE1EFC18F94202CA0B53")])
        #expect(try registry.decode(AdvertisementContext(advertisement: ruuvi)).format == "ruuvi_rawv1")
    }

    @Test("SwitchBot meter: bit 7 of the degrees byte clear means below zero")
    func switchBotNegative() throws {
        let decoded = try Self.decode(service: [0xFD3D: "6900ba031938"])
        #expect(decoded.format == "switchbot")
        #expect(Self.value(decoded, "temperature") == .number(-25.3))
        #expect(Self.value(decoded, "humidity") == .number(56))
        #expect(Self.value(decoded, "battery") == .number(58))
    }

    @Test("SwitchBot Outdoor Meter: battery from the service data, climate from 0x0969 in the same advertisement")
    func switchBotOutdoorMerged() throws {
        let decoded = try Self.decode(
            service: [0xFD3D: "770041"], manufacturer: [0x0969: "aabbccddeeffe30f090f2a00"], name: "Outdoor Meter")
        #expect(decoded.format == "switchbot")
        #expect(Self.value(decoded, "temperature") == .number(-15.9))
        #expect(Self.value(decoded, "humidity") == .number(42))
        #expect(Self.value(decoded, "battery") == .number(65))
        // Without its service data and without a meter name the manufacturer data is not claimed.
        let unnamed = #expect(throws: ParseError.self) {
            try Self.decode(manufacturer: [0x0969: "aabbccddeeffe30f090f2a00"])
        }
        #expect(unnamed?.kind == .unknownFormat)
    }

    @Test("SwitchBot Blind Tilt: openness and direction around the middle position")
    func switchBotBlindTilt() throws {
        for (byte, open, direction) in [("32", 100.0, "—"), ("00", 0, "down"), ("55", 30, "up"), ("28", 80, "down")] {
            let decoded = try Self.decode(
                service: [0xFD3D: "780036"], manufacturer: [0x0969: "aabbccddeeffd327\(byte)14"])
            #expect(Self.value(decoded, "tilt") == .number(open), "\(byte)")
            #expect(Self.value(decoded, "tilt_direction") == .string(direction), "\(byte)")
        }
    }

    @Test("Qingping CGPR1: object 0x11 is the light state; event frames carry no illuminance")
    func qingpingMotionAndLight() throws {
        let light = try Self.decode(service: [0xFDCD: "c812ffeeddccbbaa1101010f015f"])
        #expect(Self.value(light, "light") == .bool(true))
        #expect(Self.value(light, "motion") == nil)
        let event = try Self.decode(service: [0xFDCD: "4812ffeeddccbbaa0804010300000f0150"])
        #expect(Self.value(event, "motion") == .bool(true))
        #expect(Self.value(event, "illuminance") == nil)
        let periodic = try Self.decode(service: [0xFDCD: "0812005e60342d580201640f01e7090426000000"])
        #expect(Self.value(periodic, "illuminance") == .number(38))
        let motion = try Self.decode(service: [0xFDCD: "0812005e60342d580201640f015a080401b83601"])
        #expect(Self.value(motion, "illuminance") == .number(79544))
    }

    @Test("Qingping CGH1: door from object 0x04 or from the second 0x0F of a periodic frame")
    func qingpingDoor() throws {
        let periodic = try Self.decode(service: [0xFDCD: "0804751060342d580201600f01420f0101"])
        #expect(Self.value(periodic, "opening") == .bool(false))
        #expect(Self.value(periodic, "packet_id") == .number(0x42))
        let leftOpen = try Self.decode(service: [0xFDCD: "4804751060342d580401020f01cb"])
        #expect(Self.value(leftOpen, "opening") == .bool(true))
        #expect(Self.value(leftOpen, "left_open") == .bool(true))
    }

    @Test("Qingping: battery FF (external power) reads 100 %, bit 7 of the CGD1's battery is masked")
    func qingpingBattery() throws {
        let powered = try Self.decode(service: [0xFDCD: "080effeeddccbbaa0201ff"])
        #expect(Self.value(powered, "battery") == .number(100))
        let clock = try Self.decode(service: [0xFDCD: "080cffeeddccbbaa0201d0"])
        #expect(Self.value(clock, "battery") == .number(80))
    }

    @Test("Qingping: a truncated object is too_short, an unknown device id is not claimed")
    func qingpingBadFrames() {
        let truncated = #expect(throws: ParseError.self) {
            try Self.decode(service: [0xFDCD: "0807ffeeddccbbaa01041201"])
        }
        #expect(truncated?.kind == .tooShort)
        let unknown = #expect(throws: ParseError.self) {
            try Self.decode(service: [0xFDCD: "08ffffeeddccbbaa020164"])
        }
        #expect(unknown?.kind == .unknownFormat)
    }

    @Test("Sensirion SCD4x: CO₂ after the humidity word; SHT3x (type 04) without; unknown sample types are not claimed")
    func sensirion() throws {
        let decoded = try Self.decode(manufacturer: [0x06D5: "000867355367925c0b040609"])
        #expect(Self.value(decoded, "temperature") == .number(25.63))
        #expect(Self.value(decoded, "humidity") == .number(36.16))
        #expect(Self.value(decoded, "co2") == .number(1035))
        let sht3x = try Self.decode(manufacturer: [0x06D5: "000467355367925c"])
        #expect(Self.value(sht3x, "temperature") == .number(25.63))
        #expect(Self.value(sht3x, "humidity") == .number(36.16))
        #expect(Self.value(sht3x, "co2") == nil)
        #expect(throws: ParseError.self) { try Self.decode(manufacturer: [0x06D5: "000267355367925c"]) }
    }

    @Test("ThermoPro: the temperature's low byte is the company id's high byte, any id ending C2")
    func thermoPro() throws {
        let decoded = try Self.decode(manufacturer: [0xFFC2: "ff28012c"], name: "TP357 (2B54)")
        #expect(decoded.format == "thermopro_tp35x")
        #expect(Self.value(decoded, "temperature") == .number(-0.1))
        #expect(Self.value(decoded, "humidity") == .number(40))
        #expect(Self.value(decoded, "battery_low") == .bool(true))
        let other = #expect(throws: ParseError.self) {
            try Self.decode(manufacturer: [0xFFC2: "ff28012c"], name: "Something else")
        }
        #expect(other?.kind == .unknownFormat)
        let empty = try Self.decode(manufacturer: [0xFFC2: "ffff02"], name: "TP357S")
        #expect(Self.value(empty, "temperature") == .null)
    }

    @Test("Inkbird IBS-TH: negative temperature in the company id, claimed only under its names")
    func inkbirdIBSTH() throws {
        let decoded = try Self.decode(manufacturer: [0xFB76: "00000010805908"], name: "tps")
        #expect(decoded.format == "inkbird_ibs_th")
        #expect(Self.value(decoded, "temperature") == .number(-11.62))
        #expect(Self.value(decoded, "humidity") == nil)
        #expect(Self.value(decoded, "battery") == .number(89))
        let unnamed = #expect(throws: ParseError.self) {
            try Self.decode(manufacturer: [0xFB76: "00000010805908"], name: "spsx")
        }
        #expect(unnamed?.kind == .unknownFormat)
    }

    @Test(
        "Inkbird iBBQ: unplugged probes (F6 FF, FF FF) read null, other values are signed; a MAC that is not the sender's is not claimed"
    )
    func inkbirdIBBQ() throws {
        let decoded = try Self.decode(manufacturer: [0x0000: "0000aabbccddeeff0401f6ff58021202"])
        #expect(decoded.format == "inkbird_ibbq")
        #expect(Self.value(decoded, "temperature") == .number(26))
        #expect(Self.value(decoded, "temperature_2") == .null)
        #expect(Self.value(decoded, "temperature_4") == .number(53))
        let cold = try Self.decode(manufacturer: [0x0000: "0000aabbccddeeffceffffff"])
        #expect(Self.value(cold, "temperature") == .number(-5))
        #expect(Self.value(cold, "temperature_2") == .null)
        let own = try Self.decode(
            manufacturer: [0x0001: "0000ffeeddccbbaadc00cf00"], address: "AA:BB:CC:DD:EE:FF")
        #expect(Self.value(own, "temperature_2") == .number(20.7))
        let foreign = #expect(throws: ParseError.self) {
            try Self.decode(manufacturer: [0x0001: "0000ffeeddccbbaadc00cf00"], address: "11:22:33:44:55:66")
        }
        #expect(foreign?.kind == .unknownFormat)
    }

    @Test("parsers that read the company id survive random payloads under random ids")
    func anyCompanyFuzz() {
        var random = SplitMix64(seed: 19)
        let parsers: [any AdvertisementParser] = [ThermoProTP35x(), InkbirdIBSTH()]
        let names = [nil, "sps", "tps", "TP357", "TP393S"]
        for index in 0..<20000 {
            let payload = (0..<Int.random(in: 0...12, using: &random)).map { _ in
                UInt8.random(in: 0...255, using: &random)
            }
            let key = AdvertisementKey.manufacturer(UInt16.random(in: 0...0xFFFF, using: &random))
            let context = AdvertisementContext(advertisement: AdvertisementData(localName: names[index % names.count]))
            for parser in parsers { _ = try? parser.decode(payload, key: key, context: context) }
            _ = try? ParserRegistry.builtIn.decode(context)
        }
    }
}
