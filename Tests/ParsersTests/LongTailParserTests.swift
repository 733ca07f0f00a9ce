import Bluetooth
import Parsers
import Testing

/// The long-tail vendor parsers (issue #19): the cases the vectors do not pin down.
@Suite("Long-tail vendor parsers")
struct LongTailParserTests {
    func decode(_ advertisement: AdvertisementData) throws(ParseError) -> DecodedAdvertisement {
        try ParserRegistry.builtIn.decode(AdvertisementContext(advertisement: advertisement))
    }

    func value(_ decoded: DecodedAdvertisement, _ name: String) -> ReadingValue? {
        decoded.readings.first { $0.name == name }?.value
    }

    static let plainBeacon = [UInt8](hexString: "0215426c7565436861726d426561636f6e730efe1355c5")

    @Test("a plain iBeacon still decodes as ibeacon with the sensor-beacon parsers registered")
    func plainIBeacon() throws {
        let decoded = try decode(AdvertisementData(manufacturerData: [0x004C: Self.plainBeacon]))
        #expect(decoded.format == "ibeacon")
        #expect(value(decoded, "major") == .number(3838))
        #expect(value(decoded, "tx_power") == .number(-59))
        // 24 bytes (Jaalee's length) but neither its UUID nor its service UUID: still plain iBeacon.
        let longer = try decode(AdvertisementData(manufacturerData: [0x004C: Self.plainBeacon + [0x64]]))
        #expect(longer.format == "ibeacon")
    }

    @Test("Tilt: °F in the major becomes °C, gravity from the minor; an unknown colour is plain iBeacon")
    func tilt() throws {
        let red = [UInt8](hexString: "0215a495bb10c5b14b44b5121370f02d74de002003f8c5")
        let decoded = try decode(AdvertisementData(manufacturerData: [0x004C: red]))
        #expect(decoded.format == "tilt")
        #expect(value(decoded, "temperature") == .number(0))  // 32 °F
        #expect(value(decoded, "specific_gravity") == .number(1.016))
        var unknown = red
        unknown[5] = 0x90
        #expect(try decode(AdvertisementData(manufacturerData: [0x004C: unknown])).format == "ibeacon")
        // Tilt Pro: minor ≥ 5000, tenths of °F and gravity × 10000 (68.5 °F, 1.0505).
        let pro = [UInt8](hexString: "0215a495bb20c5b14b44b5121370f02d74de02ad2909c5")
        let high = try decode(AdvertisementData(manufacturerData: [0x004C: pro]))
        #expect(value(high, "temperature") == .number(20.278))
        #expect(value(high, "specific_gravity") == .number(1.0505))
    }

    @Test("Blue Maestro: Temperature Sensor v8 and the little-endian Tempo Disc Maxi")
    func blueMaestroMaxi() throws {
        let maxi = [UInt8](hexString: "2b570000000000000000000000000032fb3421cd8b010000")
        let decoded = try decode(AdvertisementData(manufacturerData: [0x0133: maxi]))
        #expect(decoded.format == "tempo_disc")
        #expect(value(decoded, "temperature") == .number(-12.3))
        #expect(value(decoded, "humidity") == .number(85))
        #expect(value(decoded, "pressure") == .number(1013.25))
        #expect(value(decoded, "dew_point") == nil)
        let short = Array(maxi.prefix(22))
        #expect(throws: ParseError.self) { try decode(AdvertisementData(manufacturerData: [0x0133: short])) }
        let v8 = try decode(AdvertisementData(manufacturerData: [0x0133: [UInt8](hexString: "085700000000ff85")]))
        #expect(value(v8, "temperature") == .number(-12.3))
        #expect(value(v8, "battery") == .number(87))
    }

    @Test("Jaalee is recognised by its proximity UUID when the service UUID is not in the advertisement")
    func jaaleeWithoutServiceUUID() throws {
        let payload = [UInt8](hexString: "0215ebefd08370a247c89837e7b5634df52567f857becb64")
        let decoded = try decode(AdvertisementData(manufacturerData: [0x004C: payload]))
        #expect(decoded.format == "jaalee")
        #expect(value(decoded, "battery") == .number(100))
    }

    @Test("Sensor Easy: 0x7FFF is no temperature, the battery still comes out; no name, no claim")
    func sensorEasy() throws {
        let ad = AdvertisementData(
            localName: "P T EN 888888", manufacturerData: [0x0757: [0xF2, 0x02, 0x0C]],
            serviceData: [BluetoothUUID(0x2A6E): [0xFF, 0x7F]])
        let decoded = try decode(ad)
        #expect(decoded.format == "sensor_easy")
        #expect(value(decoded, "temperature") == nil)
        #expect(value(decoded, "voltage") == .number(3.074))
        var anonymous = ad
        anonymous.localName = nil
        #expect(throws: ParseError.self) { try decode(anonymous) }
    }

    @Test("Blue Maestro and Oria: negative temperatures")
    func negativeTemperatures() throws {
        let disc = [UInt8](hexString: "0d6402580ad1ff9c0100")
        #expect(value(try decode(AdvertisementData(manufacturerData: [0x0133: disc])), "temperature") == .number(-10))
        let oria = [UInt8](hexString: "0105aabbccddeeff0107ff0615e0630001")
        let decoded = try decode(AdvertisementData(localName: "T301", manufacturerData: [0xAA55: oria]))
        #expect(value(decoded, "temperature") == .number(-2.5))
    }

    @Test("b-parasite: a frame flagged with illuminance but without its bytes is an error")
    func bParasiteTruncated() {
        let payload = [UInt8](hexString: "11c30b8658aca6666b85aabbccddeeff")
        let error = #expect(throws: ParseError.self) {
            try decode(AdvertisementData(serviceData: [BluetoothUUID(0x181A): payload]))
        }
        #expect(error?.kind == .length)
    }

    @Test("iNode: low battery from the company id, a zero constant gives no rates")
    func iNode() throws {
        let payload = [UInt8](hexString: "6300f0cf00000000260080")
        let decoded = try decode(AdvertisementData(manufacturerData: [0x8294: payload]))
        #expect(value(decoded, "battery_low") == .bool(true))
        #expect(value(decoded, "power") == nil)
        #expect(value(decoded, "battery") == .number(10))
    }

    @Test("Feasycom: 0x65 in the battery byte means external power, no battery reading")
    func feasyPlugged() throws {
        let payload = [UInt8](hexString: "27021992aabbccddeeff65")
        let decoded = try decode(AdvertisementData(serviceData: [BluetoothUUID(0xFFF0): payload]))
        #expect(value(decoded, "plugged_in") == .bool(true))
        #expect(value(decoded, "battery") == nil)
    }

    @Test("Radioland: sensor data without the RDL52832 name is not claimed")
    func radiolandNeedsName() {
        let payload = [UInt8](hexString: "183a2f33010000020000000100000907")
        #expect(throws: ParseError.self) {
            try decode(AdvertisementData(serviceData: [BluetoothUUID(0x0318): payload]))
        }
    }
}
