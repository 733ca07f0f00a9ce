import JSON
import Testing

@Suite("JSON values")
struct JSONTests {
    @Test("parsing keeps booleans, numbers and key order apart; serializing round-trips")
    func roundTrip() throws {
        let text = #"{"b":true,"n":1,"f":21.53,"s":"a\"b\\c\n","a":[null,false,-0.5],"o":{"z":1,"a":2}}"#
        let value = try JSONValue.parse(Array(text.utf8))
        #expect(value["b"] == .bool(true))
        #expect(value["n"] == .number(1))
        if case .object(let members) = value["o"] { #expect(members.map(\.key) == ["z", "a"]) }
        #expect(value.serialized == text)
        #expect(try JSONValue.parse(Array(value.serialized.utf8)) == value)
    }

    @Test(
        "numbers: integers without fraction, shortest round-trip form, non-finite as null",
        arguments: [
            (21.0, "21"), (-4.5, "-4.5"), (0.1, "0.1"), (1013.25, "1013.25"), (Double.nan, "null"),
            (Double.infinity, "null"),
        ])
    func numbers(value: Double, text: String) {
        #expect(JSONValue.number(value).serialized == text)
    }

    @Test(
        "a number is written as Swift's shortest round-trip text: the decimal and integer fast paths agree with description on a million values"
    )
    func numbersAgreeWithDescription() {
        // Seeded values in the shapes readings take (decimals of 1–4 places, scaled raw
        // integers) and arbitrary doubles across magnitudes.
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        var mismatches: [String] = []
        for index in 0..<1_000_000 {
            let raw = Double(Int64(bitPattern: next()) % 10_000_000)
            let value: Double
            switch index % 5 {
            case 0: value = raw / 10
            case 1: value = raw / 100
            case 2: value = raw / 1000
            case 3: value = raw / 10_000
            default: value = Double(bitPattern: next())
            }
            guard value.isFinite else { continue }
            var bytes: [UInt8] = []
            JSONValue.writeNumber(value, into: &bytes)
            let expected =
                abs(value) < 9_007_199_254_740_992 && Int64(exactly: value) != nil
                ? String(Int64(exactly: value)!) : value.description
            if String(decoding: bytes, as: UTF8.self) != expected, mismatches.count < 5 {
                mismatches.append("\(value.bitPattern): \(String(decoding: bytes, as: UTF8.self)) vs \(expected)")
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches)")
    }

    @Test("control characters are escaped, other Unicode passes through")
    func escaping() throws {
        let value = JSONValue.string("°C\u{01}")
        #expect(value.serialized == "\"°C\\u0001\"")
        #expect(try JSONValue.parse(Array(value.serialized.utf8)) == value)
        let every = JSONValue.string("a\"b\\c\nd\re\tf\u{1F}g\u{0B}")
        #expect(every.serialized == #""a\"b\\c\nd\re\tf\u001fg\u000b""#)
        #expect(try JSONValue.parse(Array(every.serialized.utf8)) == every)
    }

    @Test(
        "malformed JSON is an error with the byte offset, never a crash",
        arguments: [
            "", "{", "[1,]", "{\"a\" 1}", "tru", "\"abc", "01x", "[1] 2", String(repeating: "[", count: 300),
        ])
    func malformed(text: String) {
        #expect(throws: JSONTextParser.SyntaxError.self) { try JSONValue.parse(Array(text.utf8)) }
    }

    @Test("readers name the JSON path of a bad value and of an unknown key")
    func readerPaths() throws {
        let root = try JSONReader.parse(Array(#"{"mqtt": {"port": "x", "typo": 1}}"#.utf8)).object()
        let mqtt = try root.required("mqtt").object()
        #expect(throws: JSONPathError.self) { try mqtt.required("port").integer(in: 1...65535) }
        do {
            _ = try mqtt.required("port").integer(in: 1...65535)
        } catch {
            #expect("\(error)" == "mqtt.port: expected an integer from 1 to 65535, got \"x\"")
        }
        do {
            try mqtt.finish()
            Issue.record("unknown key accepted")
        } catch {
            #expect("\(error)" == "mqtt.typo: is not a known key")
        }
    }

    @Test("durations", arguments: [("500ms", 0.5), ("30s", 30.0), ("5m", 300.0), ("1h", 3600.0), ("2", 2.0)])
    func durations(text: String, seconds: Double) {
        #expect(DurationText.seconds(text) == seconds)
    }

    @Test("bad durations are rejected", arguments: ["", "ms", "-1s", "5x", "1e400s", "1e306h", "1e308m"])
    func badDurations(text: String) {
        #expect(DurationText.seconds(text) == nil)
    }

    @Test(
        "an integer just past Int.max is a reader error, not a trap",
        arguments: [
            "9223372036854775808", "1e19", "-1e19", "1e300",
        ])
    func integerBeyondInt(text: String) throws {
        let reader = try JSONReader.parse(Array("{\"seed\": \(text)}".utf8)).object().required("seed")
        #expect(throws: JSONPathError.self) { try reader.integer(in: 0...Int.max) }
        #expect(throws: JSONPathError.self) { try reader.integer(in: Int.min...Int.max) }
    }

    @Test("integers in range still read, including the largest exactly representable ones")
    func integersInRange() throws {
        let reader = try JSONReader.parse(Array("[0, 9007199254740992, -9223372036854775808, 2.5]".utf8)).array()
        #expect(try reader[0].integer(in: 0...Int.max) == 0)
        #expect(try reader[1].integer(in: 0...Int.max) == 9_007_199_254_740_992)
        #expect(try reader[2].integer(in: Int.min...0) == Int.min)
        #expect(throws: JSONPathError.self) { try reader[3].integer(in: 0...10) }
    }

    @Test("saturating conversion: toward zero in range, the nearest bound outside it, 0 for NaN")
    func saturatingConversion() {
        #expect(Int64(saturating: 2.9) == 2)
        #expect(Int64(saturating: -2.9) == -2)
        #expect(Int64(saturating: 1e19) == .max)
        #expect(Int64(saturating: 9_223_372_036_854_775_808.0) == .max)
        #expect(Int64(saturating: -1e300) == .min)
        #expect(Int64(saturating: Double.infinity) == .max)
        #expect(Int64(saturating: Double.nan) == 0)
        #expect(UInt64(saturating: -1.0) == 0)
        #expect(UInt64(saturating: 1e20) == .max)
        #expect(Int16(saturating: 40_000.0) == .max)
        #expect(UInt8(saturating: 255.9) == 255)
        #expect(Int32(saturating: Float(-3e9)) == .min)
    }

    /// Found by the json (and scenario) fuzz targets: Tests/Fixtures/fuzz/json/
    /// surrogate-pair-low-half-below-dc00. A high surrogate followed by a `\u` escape that is not
    /// a low surrogate (`\udB00`, `\u0041`) trapped on `low - 0xDC00` (arithmetic overflow).
    @Test(
        "a high surrogate without its low half is U+FFFD and the next escape stands alone",
        arguments: [
            (#""\ud83d\udB00 x""#, "\u{FFFD}\u{FFFD} x"), (#""\ud800\u0041""#, "\u{FFFD}A"), (#""\ud83d\ude00""#, "😀"),
            (#""\udc00\ud800""#, "\u{FFFD}\u{FFFD}"), (#""\ud800 ""#, "\u{FFFD} "),
        ])
    func loneSurrogates(text: String, parsed: String) throws {
        #expect(try JSONValue.parse(Array(text.utf8)) == .string(parsed))
    }

    @Test(
        "a \\u escape is exactly four hex digits, no sign",
        arguments: [#""\u+12a""#, #""\u-000""#, #""\u12""#, #""\u12g4""#])
    func badUnicodeEscapes(text: String) {
        #expect(throws: JSONTextParser.SyntaxError.self) { try JSONValue.parse(Array(text.utf8)) }
    }

    @Test("1 MB of '[' or of '{\"k\":' is a clear error at the depth limit, not a stack overflow")
    func hostileNesting() {
        for unit in ["[", #"{"k":"#] {
            let text = [UInt8](String(repeating: unit, count: (1 << 20) / unit.utf8.count).utf8)
            do {
                _ = try JSONValue.parse(text)
                Issue.record("accepted")
            } catch {
                #expect("\(error)".contains("nested too deeply"))
            }
        }
    }
}
