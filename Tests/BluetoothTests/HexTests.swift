import Bluetooth
import Testing

@Suite("Hex: the one hex codec")
struct HexTests {
    static let bytes: [UInt8] = [0x00, 0x5E, 0x01, 0xAB, 0xFF]

    @Test("bytes encode as two digits each, lower case by default, with or without a separator")
    func encodeBytes() {
        #expect(Hex.encode(Self.bytes) == "005e01abff")
        #expect(Hex.encode(Self.bytes, uppercase: true) == "005E01ABFF")
        #expect(Hex.encode(Self.bytes, separator: " ") == "00 5e 01 ab ff")
        #expect(Hex.encode(Self.bytes.dropFirst(3), separator: ":", uppercase: true) == "AB:FF")
        #expect(Hex.encode([UInt8]()) == "" && Hex.encode([UInt8](), separator: " ") == "")
        #expect(Hex.encode([0x7F], separator: " ") == "7f")
        let all = (0...255).map { UInt8($0) }
        #expect(Hex.encode(all) == all.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined())
    }

    @Test("numbers encode as a fixed count of digits with leading zeros")
    func encodeNumbers() {
        #expect(Hex.encode(0x180F, digits: 4, uppercase: true) == "180F")
        #expect(Hex.encode(0xFEAA, digits: 8, uppercase: true) == "0000FEAA")
        #expect(Hex.encode(0xA4C1_380B_1234, digits: 12) == "a4c1380b1234")
        #expect(Hex.encode(UInt64.max, digits: 16) == "ffffffffffffffff")
        #expect(Hex.encode(0xABC, digits: 2) == "bc", "only the low digits")
        #expect(Hex.encode(1, digits: 20) == "00000000000000000001")
        var out: [UInt8] = Array("x".utf8)
        Hex.append(0x2A, digits: 4, to: &out)
        #expect(String(decoding: out, as: UTF8.self) == "x002a")
    }

    @Test("decoding reads digit pairs in either case, skipping the separators it is given, also inside a pair")
    func decode() {
        #expect(Hex.decode("005e01abff") == Self.bytes)
        #expect(Hex.decode("00 5E:01-aB ff") == Self.bytes)
        #expect(Hex.decode("0:1ff") == [0x01, 0xFF])
        #expect(Hex.decode("") == [] && Hex.decode(" : ") == [])
        #expect(Hex.decode(Hex.encode(Self.bytes, separator: " ")) == Self.bytes)
        #expect(Hex.decode("01,ff", separators: " ,") == [0x01, 0xFF])
        #expect(Hex.decode("01 ff", separators: "") == nil)
    }

    @Test("decoding rejects an odd number of digits, any other character, and 0x unless prefixes are allowed")
    func decodeRejects() {
        for text in ["0", "abc", "0g", "01,ff", "+f", "0x01", "é1", "１２", "01\n", "0 x01"] {
            #expect(Hex.decode(text) == nil, "\(text)")
        }
        #expect(Hex.decode("-") == [], "a separator alone is no bytes")
    }

    @Test("with prefixes, 0x and 0X are skipped wherever they stand, as the CLI's values allow")
    func decodePrefixes() {
        let cli = " ,:-"
        #expect(Hex.decode("0x01,0xff", separators: cli, prefixes: true) == [0x01, 0xFF])
        #expect(Hex.decode("0X01 0Xff", separators: cli, prefixes: true) == [0x01, 0xFF])
        #expect(Hex.decode("010x02", separators: cli, prefixes: true) == [0x01, 0x02])
        #expect(Hex.decode("00x1", separators: cli, prefixes: true) == [0x01])
        #expect(Hex.decode("0x", separators: cli, prefixes: true) == [])
        #expect(Hex.decode("00xx", separators: cli, prefixes: true) == nil)
        #expect(Hex.decode("0 x01", separators: cli, prefixes: true) == nil)
        #expect(Hex.decode("0x1", separators: cli, prefixes: true) == nil)
    }

    @Test("each digit's value, with bit 4 set for anything else; digits back from values")
    func digits() {
        let digits = Array("0123456789abcdefABCDEF".utf8)
        for (index, byte) in digits.enumerated() {
            #expect(Hex.value(byte) == UInt8(index < 16 ? index : index - 6))
        }
        for byte in (0...255).map({ UInt8($0) }) where !digits.contains(byte) {
            #expect(Hex.value(byte) == 0x10)
        }
        #expect(Hex.value(Unicode.Scalar("F")) == 15 && Hex.value(Unicode.Scalar("g")) == nil)
        #expect(Hex.value(Unicode.Scalar(0x0661)!) == nil, "an Arabic-Indic digit is no hex digit")
        for nibble in 0..<16 {
            #expect(Hex.digit(UInt8(nibble)) == Array("0123456789abcdef".utf8)[nibble])
            #expect(Hex.digit(UInt8(nibble), uppercase: true) == Array("0123456789ABCDEF".utf8)[nibble])
        }
    }
}
