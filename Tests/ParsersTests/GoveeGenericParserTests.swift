import Bluetooth
import Parsers
import Testing

/// Non-obvious cases of the Govee, GENERIC (BM2/BM6, TPMS, ThermoBeacon, GAEN, battery service
/// data), Oral-B and Mopeka parsers (issue #19); the vectors cover the plain cases.
@Suite("Govee, GENERIC, Oral-B and Mopeka parsers")
struct GoveeGenericParserTests {
    func decode(
        _ manufacturer: [UInt16: String], name: String? = nil, uuids: [BluetoothUUID] = [],
        address: BluetoothAddress? = nil
    ) throws(ParseError) -> DecodedAdvertisement {
        let ad = AdvertisementData(
            localName: name, serviceUUIDs: uuids, manufacturerData: manufacturer.mapValues { [UInt8](hexString: $0) })
        return try ParserRegistry.builtIn.decode(AdvertisementContext(advertisement: ad, address: address))
    }

    func value(_ decoded: DecodedAdvertisement, _ name: String) -> ReadingValue? {
        decoded.readings.first { $0.name == name }?.value
    }

    /// CRC-16/CCITT, initial 0x1D0F (written here independently of the parser's).
    static func crc(_ bytes: [UInt8]) -> UInt16 {
        var crc: UInt16 = 0x1D0F
        for byte in bytes {
            crc ^= UInt16(byte) << 8
            for _ in 0..<8 { crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1 }
        }
        return crc
    }

    /// An H512x frame: `plain` encrypted with the key the frame carries.
    static func h512x(_ plain: [UInt8], time: [UInt8] = [0x12, 0x34, 0x56, 0x78]) -> [UInt8]? {
        let key = Array((time + [UInt8](repeating: 0, count: 12)).reversed())
        guard let sealed = AESECB.encrypt(key: key, plaintext: plain.reversed()) else { return nil }
        let encrypted = Array(sealed.reversed())
        let crc = crc(encrypted)
        return [0xAB, 0xCD] + time + encrypted + [UInt8(crc >> 8), UInt8(crc & 0xFF)]
    }

    @Test("H512x frames decrypt with the key in the frame; a bad CRC is not claimed")
    func goveeEncrypted() throws {
        let plain: [UInt8] = [0x01, 0x05, 0x02, 0x02, 0x37, 0x02] + [UInt8](repeating: 0, count: 10)
        let frame = try #require(Self.h512x(plain))
        let ad = AdvertisementData(manufacturerData: [0xEF88: frame])
        let decoded = try ParserRegistry.builtIn.decode(AdvertisementContext(advertisement: ad))
        #expect(decoded.format == "govee_h512x")
        #expect(value(decoded, "battery") == .number(55))
        #expect(value(decoded, "window") == .bool(true))
        var corrupt = frame
        corrupt[10] ^= 0x01
        let error = #expect(throws: ParseError.self) {
            try ParserRegistry.builtIn.decode(
                AdvertisementContext(advertisement: AdvertisementData(manufacturerData: [0xEF88: corrupt])))
        }
        #expect(error?.kind == .unknownFormat)
        // H5130: value 0x10 is its button, anything else presence.
        let button = try #require(Self.h512x([0x01, 0x0E, 0x0D, 0x02, 0x64, 0x10] + [UInt8](repeating: 0, count: 10)))
        let pressed = try ParserRegistry.builtIn.decode(
            AdvertisementContext(advertisement: AdvertisementData(manufacturerData: [0xEF88: button])))
        #expect(value(pressed, "button_0") == .string("press"))
        #expect(value(pressed, "presence") == nil)
        // 0x11: the button pressed while pressure is applied (a bit field), both reported.
        let both = try #require(Self.h512x([0x01, 0x0E, 0x0D, 0x02, 0x64, 0x11] + [UInt8](repeating: 0, count: 10)))
        let pressedAndPresent = try ParserRegistry.builtIn.decode(
            AdvertisementContext(advertisement: AdvertisementData(manufacturerData: [0xEF88: both])))
        #expect(value(pressedAndPresent, "button_0") == .string("press"))
        #expect(value(pressedAndPresent, "presence") == .bool(true))
    }

    @Test("Oral-B: iO series mode numbering by model byte, brushing, the 11-byte frame's sector fields")
    func oralB() throws {
        // iO (model 0x35): mode 2 is gum care; Smart series (0x71): mode 2 is sensitive.
        let io = try decode([0x00DC: "0635010330020a02030304"])
        #expect(io.format == "oralb")
        #expect(value(io, "mode") == .string("gum care"))
        #expect(value(io, "brushing") == .bool(true))
        #expect(value(io, "state") == .string("running"))
        #expect(value(io, "sector_timer") == .number(3))
        #expect(value(io, "number_of_sectors") == .number(4))
        let smart = try decode([0x00DC: "047105092000000203"])
        #expect(value(smart, "mode") == .string("sensitive"))
        #expect(value(smart, "state") == .string("off"))
        #expect(value(smart, "brushing") == .bool(false))
        #expect(value(smart, "sector_timer") == nil)
    }

    @Test("H5055 is found under any company id by name or service UUID, and only then")
    func goveeAnyCompany() throws {
        let payload = "0400461b061700ffff2c01067300ffff2c010000"
        let named = try decode([0x04CF: payload], name: "GVH5055")
        #expect(named.format == "govee_h5055")
        #expect(value(named, "temperature_probe_1") == .number(23))
        #expect(value(named, "temperature_probe_2") == .number(115))
        #expect(value(named, "temperature_alarm_probe_2") == .number(300))
        #expect(value(named, "low_temperature_alarm_probe_1") == nil)
        let byUUID = try decode([0x1234: payload], uuids: [BluetoothUUID(0x5550)])
        #expect(byUUID.format == "govee_h5055")
        let error = #expect(throws: ParseError.self) { try decode([0x04CF: payload]) }
        #expect(error?.kind == .unknownFormat)
        // A parser registered for the company id comes first.
        let keyed = try decode([0x0001: "0101035e1364" + String(repeating: "00", count: 14)], name: "GVH5055")
        #expect(keyed.format == "govee_h5101")
    }

    @Test("Govee models sharing 0x0001: H5140 error byte, H5112 probes, H5178 remote, appended iBeacon")
    func goveeSharedHeader() throws {
        let ibeacon = "4c000215494e54454c4c495f524f434b535f48575075f2ff0c"
        let co2 = try decode([0x0001: "0101031abd025d00" + ibeacon], name: "GV5140303A")
        #expect(co2.format == "govee_h5140")
        #expect(value(co2, "co2") == .number(605))
        let failed = try decode([0x0001: "0101031abc025801"], name: "GV5140303A")
        #expect(value(failed, "co2") == .null)
        #expect(value(failed, "temperature") == .null)
        let probe2 = try decode([0x0001: "0101034928640082"], name: "GV5112AC3D")
        #expect(value(probe2, "temperature_probe_2") == .number(21.5))
        #expect(value(probe2, "humidity_probe_2") == nil)
        #expect(throws: ParseError.self) { try decode([0x0001: "0101034928640033"], name: "GV5112AC3D") }
        let remote = try decode([0x0001: "0101018188955a0003"])
        #expect(value(remote, "temperature_remote") == .number(-10.0))
        #expect(value(remote, "humidity_remote") == .number(50.1))
        #expect(value(remote, "battery_remote") == .number(90))
    }

    @Test("meat thermometers: unset values read 0, probe groups pick the probe numbers")
    func goveeMeat() throws {
        let h5198 = try decode([0x3022: "6c01000101a4c20f0e10ffffffff08fcffffffff"])
        #expect(value(h5198, "temperature_probe_3") == .number(36))
        #expect(value(h5198, "low_temperature_alarm_probe_4") == .number(0))
        #expect(throws: ParseError.self) { try decode([0x3022: "6c01000101a4c30f0e10ffffffff08fcffffffff"]) }
        // Not the header: not claimed.
        #expect(throws: ParseError.self) { try decode([0x3022: "6c02000101a4c20f0e10ffffffff08fcffffffff"]) }
    }

    @Test("TPMS: the address in the frame must be the advertiser's; negative temperatures")
    func tpms() throws {
        let address = BluetoothAddress("82:EA:CA:DD:EE:FF")
        let decoded = try decode([0x0100: "82eacaddeeff11fc0300f4ffffff5301"], address: address)
        #expect(value(decoded, "count") == .number(3))
        #expect(value(decoded, "temperature") == .number(-0.12))
        #expect(value(decoded, "alarm") == .bool(true))
        #expect(decoded.readings.first { $0.name == "pressure" }?.unit == "bar")
        #expect(throws: ParseError.self) {
            try decode([0x0100: "82eacaddeeff11fc0300f4ffffff5301"], address: BluetoothAddress("82:EA:CA:DD:EE:00"))
        }
    }

    @Test("ThermoBeacon: negative temperature in sixteenths, address check")
    func thermoBeacon() throws {
        let address = BluetoothAddress("70:F7:00:00:11:1A")
        let decoded = try decode([0x0010: "00001a110000f770580cd8ff6c0443090000"], address: address)
        #expect(value(decoded, "temperature") == .number(-2.5))
        #expect(throws: ParseError.self) {
            try decode([0x0010: "00001a110000f770580cd8ff6c0443090000"], address: BluetoothAddress("70:F7:00:00:11:1B"))
        }
    }

    @Test("Mopeka: sync button bit, sub-zero temperature, battery clamped")
    func mopeka() throws {
        let decoded = try decode([0x0059: "0c40a4a4c150a8cc0323"])
        #expect(value(decoded, "sync_button") == .bool(true))
        #expect(value(decoded, "temperature") == .number(-4))
        #expect(value(decoded, "battery") == .number(0))
        #expect(value(decoded, "reading_quality") == .number(3))
        // Nordic's id: other lengths and hardware ids are not claimed.
        #expect(throws: ParseError.self) { try decode([0x0059: "0d4aa4a4c150a8cc0323"]) }
    }

    @Test("BM2 battery monitor is taken before the generic iBeacon parser")
    func bm2() throws {
        let decoded = try decode([0x004C: "0215655f83caae16a10a702e31f30d58dd82f441423144"])
        #expect(decoded.format == "leagend_bm2")
        #expect(value(decoded, "battery") == .number(68))
    }

    @Test("the parser that takes any company id survives random payloads")
    func anyCompanyFuzz() {
        var random = SystemRandomNumberGenerator()
        let context = AdvertisementContext(advertisement: AdvertisementData(localName: "GVH5055"))
        for length in [0, 1, 19, 20, 21] {
            for _ in 0..<300 {
                var payload = (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) }
                if length == 20 {
                    payload[18] = 0
                    payload[19] = 0
                }
                _ = try? GoveeH5055().decode(payload, key: .manufacturer(0x1234), context: context)
            }
        }
    }
}
