import Bluetooth
import Parsers
import Testing

/// Non-obvious cases of the Xiaomi formats: model-dependent MiBeacon objects, v2/v3
/// decryption, lock key ids, the Mi scales' units and Huami's two-payload frame.
@Suite("Xiaomi parsers")
struct XiaomiParserTests {
    static func decode(
        service: UInt16, _ hex: String, address: String? = nil, key: String? = nil,
        manufacturer: [UInt16: String] = [:]
    ) throws -> DecodedAdvertisement {
        var ad = AdvertisementData(serviceData: [BluetoothUUID(service): [UInt8](hexString: hex)])
        for (company, data) in manufacturer { ad.manufacturerData[company] = [UInt8](hexString: data) }
        return try ParserRegistry.builtIn.decode(
            AdvertisementContext(
                advertisement: ad, address: address.flatMap { BluetoothAddress($0) },
                bindKey: key.map { [UInt8](hexString: $0) }))
    }

    static func value(_ decoded: DecodedAdvertisement, _ name: String) -> ReadingValue? {
        decoded.readings.first { $0.name == name }?.value
    }

    @Test("object 0x1001 means a different key per product: K9B 2-button both, YLYK01YL remote, cube")
    func buttonObjectDependsOnProduct() throws {
        // K9B-2BTN (0x1569): id 2 = both buttons, press type 0.
        let both = try Self.decode(service: 0xFE95, "504069150101691538c1a4011003020000")
        #expect(Self.value(both, "button_left") == .string("press"))
        #expect(Self.value(both, "button_right") == .string("press"))
        // The same object from the YLYK01YL remote (0x0153) is its "on" key, and switches power on.
        let remote = try Self.decode(service: 0xFE95, "503053013f7450e94124f8011003000000")
        #expect(Self.value(remote, "button_on") == .string("press"))
        #expect(Self.value(remote, "power") == .bool(true))
        // An unknown product: the object is not decoded, so the frame is unsupported.
        #expect(throws: ParseError.self) { try Self.decode(service: 0xFE95, "504034120101691538c1a4011003020000") }
    }

    @Test("v3 (legacy) encryption: the dimmer rotates one step left; a wrong key gives no readings")
    func legacyEncryption() throws {
        let frame = "5830b603368b98c54124f88bb8f2661351000000d6"
        let decoded = try Self.decode(
            service: 0xFE95, frame, address: "F8:24:41:C5:98:8B", key: "b853075158488d3d3c977ca39a5b5ea9")
        #expect(Self.value(decoded, "dimmer") == .string("rotate_left"))
        #expect(Self.value(decoded, "dimmer_steps") == .number(1))
        // The 12-byte form of the same key (without the fixed 8d3d3c97) works too.
        let short = try Self.decode(
            service: 0xFE95, frame, address: "F8:24:41:C5:98:8B", key: "b853075158487ca39a5b5ea9")
        #expect(Self.value(short, "dimmer_steps") == .number(1))
        #expect(throws: ParseError.self) {
            try Self.decode(
                service: 0xFE95, frame, address: "F8:24:41:C5:98:8B", key: "00112233445566778899aabbccddeeff")
        }
    }

    @Test("lock object 0x000B: fingerprint key range, error key ids")
    func lockKeys() throws {
        let decoded = try Self.decode(service: 0xFE95, "50449e0643918aeb441fd70b000920020001807c442f61")
        #expect(Self.value(decoded, "key_id") == .string("Fingerprint key id 2"))
        #expect(Self.value(decoded, "lock_method") == .string("biometrics"))
        #expect(Self.value(decoded, "lock") == .bool(true))
        // Same frame with key id 0xC0DE0003: an error instead of a key.
        let error = try Self.decode(service: 0xFE95, "50449e0643918aeb441fd70b0009200300dec07c442f61")
        #expect(Self.value(error, "lock_error") == .string("lock_picking"))
        #expect(Self.value(error, "key_id") == nil)
    }

    @Test("Mi Scale: pounds and jin are published in kg with the display unit; removed is not stabilized")
    func scaleUnits() throws {
        let pounds = try Self.decode(service: 0x181D, "237233e607020e10293a")
        #expect(Self.value(pounds, "weight_unit") == .string("lb"))
        #expect(Self.value(pounds, "weight") == .number(59.738))
        #expect(Self.value(pounds, "stabilized") == .bool(true))
        let removed = try Self.decode(service: 0x181D, "a23e30e607020e10293a")
        #expect(Self.value(removed, "weight") == .number(61.75))
        #expect(Self.value(removed, "stabilized") == .bool(false))
        let jin = try Self.decode(service: 0x181B, "0266e607020e10293af7019a38")
        #expect(Self.value(jin, "weight_unit") == .string("jin"))
        #expect(Self.value(jin, "weight") == .number(72.45))
        #expect(Self.value(jin, "impedance") == .number(503))
    }

    @Test("Huami: steps come from the 0xFEE0 service data beside the manufacturer frame")
    func huamiSteps() throws {
        let decoded = try Self.decode(
            service: 0xFEE0, "8d230000", manufacturer: [0x0157: "0202017dffffffffffffffffffffffffff02aabbccddeeff"])
        #expect(decoded.format == "huami_activity")
        #expect(Self.value(decoded, "steps") == .number(9101))
        #expect(Self.value(decoded, "heart_rate") == .number(125))
    }
}
