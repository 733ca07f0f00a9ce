import Bluetooth
import Parsers
import Testing

/// The encrypted 0x181A beacons of pvvx's ATC_MiThermometer firmware (`atc1441_encrypted`, 8
/// bytes; `pvvx_encrypted`, 11 bytes): known-answer frames sealed by pycryptodome with the
/// firmware's published layout, frames sealed here, and what happens without a key, with the
/// wrong key or address, and to the other 0x181A formats.
@Suite("ATC encrypted parsers")
struct ATCEncryptedParserTests {
    /// The example device and key of pvvx's `test_adv_cust.py` (MAC A4:C1:38:0B:5E:ED).
    static let address = "A4:C1:38:0B:5E:ED"
    static let key = "12345678901234567890123456789012"

    static func decode(_ hex: String, address: String? = address, key: String? = key) throws
        -> DecodedAdvertisement
    {
        try decode(bytes: [UInt8](hexString: hex), address: address, key: key)
    }

    static func decode(bytes: [UInt8], address: String? = address, key: String? = key) throws
        -> DecodedAdvertisement
    {
        try ParserRegistry.builtIn.decode(
            AdvertisementContext(
                advertisement: AdvertisementData(serviceData: [BluetoothUUID(0x181A): bytes]),
                address: address.flatMap { BluetoothAddress($0) }, bindKey: key.map { [UInt8](hexString: $0) }))
    }

    static func value(_ decoded: DecodedAdvertisement, _ name: String) -> ReadingValue? {
        decoded.readings.first { $0.name == name }?.value
    }

    /// Seals `plaintext` as the firmware does: counter, ciphertext, MIC; nonce = MAC least
    /// significant octet first + AD length (`lengthByte`, the service data length + 3 unless a
    /// test wants it wrong), 0x16, UUID 1A 18, counter; associated data 0x11.
    static func seal(_ plaintext: [UInt8], counter: UInt8, lengthByte: UInt8? = nil) throws -> [UInt8] {
        let mac = Array(try #require(BluetoothAddress(address)).octets.reversed())
        let length = lengthByte ?? UInt8(1 + plaintext.count + 4 + 3)
        let sealed = try #require(
            AESCCM.encrypt(
                key: [UInt8](hexString: key), nonce: mac + [length, 0x16, 0x1A, 0x18, counter], plaintext: plaintext,
                tagLength: 4, aad: [0x11]))
        return [counter] + sealed.ciphertext + sealed.tag
    }

    @Test("atc1441 encrypted, sealed by pycryptodome: 22.5 °C, 50 %, 99 %, trigger on, counter 0xBD")
    func atcKnownAnswer() throws {
        // Plaintext 7D 64 E3: (125 / 2) − 40 °C, 100 / 2 %, battery 0x63 with bit 7 set.
        let decoded = try Self.decode("bd729b17bebadf37")
        #expect(decoded.format == "atc1441_encrypted")
        #expect(Self.value(decoded, "temperature") == .number(22.5))
        #expect(Self.value(decoded, "humidity") == .number(50))
        #expect(Self.value(decoded, "battery") == .number(99))
        #expect(Self.value(decoded, "trigger") == .bool(true))
        #expect(Self.value(decoded, "packet_id") == .number(189))
        #expect(Self.value(decoded, "voltage") == nil)
    }

    @Test("pvvx encrypted, sealed by pycryptodome: 22.53 °C, 50.12 %, 99 %, flags 135; and −12.34 °C")
    func pvvxKnownAnswer() throws {
        let decoded = try Self.decode("bd495df4f113469952a83f")
        #expect(decoded.format == "pvvx_encrypted")
        #expect(Self.value(decoded, "temperature") == .number(22.53))
        #expect(Self.value(decoded, "humidity") == .number(50.12))
        #expect(Self.value(decoded, "battery") == .number(99))
        #expect(Self.value(decoded, "flags") == .number(135))
        #expect(Self.value(decoded, "packet_id") == .number(189))
        let cold = try Self.decode("bdaaae6fc577c1566e6c48")
        #expect(Self.value(cold, "temperature") == .number(-12.34))
        #expect(Self.value(cold, "humidity") == .number(99.99))
        #expect(Self.value(cold, "battery") == .number(7))
        #expect(Self.value(cold, "flags") == .number(0))
    }

    @Test("atc1441 encrypted scale ends: raw 0 is −40 °C, raw 255 is 87.5 °C and 127.5 %; bit 7 clear")
    func atcScaleEnds() throws {
        let low = try Self.decode(bytes: try Self.seal([0x00, 0x00, 0x00], counter: 0))
        #expect(Self.value(low, "temperature") == .number(-40))
        #expect(Self.value(low, "humidity") == .number(0))
        #expect(Self.value(low, "battery") == .number(0))
        #expect(Self.value(low, "trigger") == .bool(false))
        #expect(Self.value(low, "packet_id") == .number(0))
        let high = try Self.decode(bytes: try Self.seal([0xFF, 0xFF, 0x7F], counter: 0xFF))
        #expect(Self.value(high, "temperature") == .number(87.5))
        #expect(Self.value(high, "humidity") == .number(127.5))
        #expect(Self.value(high, "battery") == .number(127))
        #expect(Self.value(high, "trigger") == .bool(false))
        #expect(Self.value(high, "packet_id") == .number(255))
    }

    @Test("pvvx encrypted extremes: int16 minimum, humidity 655.35 %, flags 0xFF")
    func pvvxExtremes() throws {
        let decoded = try Self.decode(bytes: try Self.seal([0x00, 0x80, 0xFF, 0xFF, 0x64, 0xFF], counter: 1))
        #expect(Self.value(decoded, "temperature") == .number(-327.68))
        #expect(Self.value(decoded, "humidity") == .number(655.35))
        #expect(Self.value(decoded, "battery") == .number(100))
        #expect(Self.value(decoded, "flags") == .number(255))
    }

    @Test("the nonce holds the AD length byte: a frame sealed with another length does not open")
    func nonceLengthByte() throws {
        let frame = try Self.seal([0x10, 0x20, 0x30, 0x40, 0x50, 0x60], counter: 7, lengthByte: 0x0B)
        let error = #expect(throws: ParseError.self) { try Self.decode(bytes: frame) }
        #expect(error?.kind == .decryptionFailed)
    }

    @Test("without a key or address: missing_key; wrong key or address: decryption_failed")
    func keysAndAddresses() {
        for frame in ["bd729b17bebadf37", "bd495df4f113469952a83f"] {
            let noKey = #expect(throws: ParseError.self) { try Self.decode(frame, key: nil) }
            #expect(noKey?.kind == .missingKey)
            let noAddress = #expect(throws: ParseError.self) { try Self.decode(frame, address: nil) }
            #expect(noAddress?.kind == .missingKey)
            let wrongKey = #expect(throws: ParseError.self) {
                try Self.decode(frame, key: "00112233445566778899aabbccddeeff")
            }
            #expect(wrongKey?.kind == .decryptionFailed)
            // The MAC in written order instead of least significant octet first.
            let wrongAddress = #expect(throws: ParseError.self) { try Self.decode(frame, address: "ED:5E:0B:38:C1:A4") }
            #expect(wrongAddress?.kind == .decryptionFailed)
        }
    }

    @Test("the other 0x181A formats keep their frames; other lengths are nobody's")
    func recognition() throws {
        // ATC1441 (13 bytes) and pvvx (15 bytes) plain, with a bind key configured.
        let atc = try Self.decode("a4c1380b5eed00e12a5c0b8e05")
        #expect(atc.format == "atc1441")
        #expect(Self.value(atc, "temperature") == .number(22.5))
        let pvvx = try Self.decode("ed5e0b38c1a4cd08941367093a0105")
        #expect(pvvx.format == "pvvx")
        // b-parasite v2 (16 bytes).
        let parasite = try Self.decode("2001" + "0bb8" + "0898" + "8000" + "4000" + "aabbccddeeff")
        #expect(parasite.format == "b_parasite")
        for length in [7, 9, 10, 12, 14] {
            let error = #expect(throws: ParseError.self) {
                try Self.decode(bytes: [UInt8](repeating: 0x42, count: length))
            }
            #expect(error?.kind == .unknownFormat)
        }
    }

    @Test("an encrypted ATC frame next to a BTHome frame: without the ATC key, BTHome still decodes")
    func besideBTHome() throws {
        var ad = AdvertisementData(serviceData: [
            BluetoothUUID(0x181A): [UInt8](hexString: "c4248138c1a456088318bf"),
            BluetoothUUID(0xFCD2): [UInt8](hexString: "40015d025d0903b718"),
        ])
        ad.localName = "ATC_8D18B2"
        let decoded = try ParserRegistry.builtIn.decode(
            AdvertisementContext(advertisement: ad, address: BluetoothAddress("A4:C1:38:8D:18:B2")))
        #expect(decoded.format == "bthome_v2")
    }
}
