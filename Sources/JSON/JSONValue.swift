/// A parsed JSON document. Booleans, numbers and strings stay distinct (Foundation's
/// JSONSerialization blurs booleans and numbers on Linux), and object keys keep their order.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([(key: String, value: JSONValue)])

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case (.bool(let a), .bool(let b)): a == b
        case (.number(let a), .number(let b)): a == b
        case (.string(let a), .string(let b)): a == b
        case (.array(let a), .array(let b)): a == b
        case (.object(let a), .object(let b)): a.map(\.key) == b.map(\.key) && a.map(\.value) == b.map(\.value)
        default: false
        }
    }

    /// Parses UTF-8 JSON text (RFC 8259); the error gives the byte offset and what was expected.
    public static func parse<C: Collection>(_ bytes: C) throws -> JSONValue where C.Element == UInt8 {
        var parser = JSONTextParser(bytes: Array(bytes))
        let value = try parser.value(depth: 0)
        parser.skipSpace()
        guard parser.index == parser.bytes.count else { throw parser.error("unexpected text after the JSON value") }
        return value
    }
}

/// A recursive-descent JSON parser over bytes.
public struct JSONTextParser {
    // Only `SyntaxError` is public; the parser is used through `JSONValue.parse`.
    let bytes: [UInt8]
    var index = 0

    /// Why a text is not JSON, with the byte offset where parsing stopped.
    public struct SyntaxError: Error, CustomStringConvertible, Sendable {
        public let offset: Int
        public let message: String
        public var description: String { "invalid JSON at byte \(offset): \(message)" }
    }

    func error(_ message: String) -> SyntaxError { SyntaxError(offset: index, message: message) }

    mutating func skipSpace() {
        while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
    }

    mutating func value(depth: Int) throws -> JSONValue {
        guard depth < 256 else { throw error("nested too deeply") }
        skipSpace()
        guard index < bytes.count else { throw error("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"):
            index += 1
            var members: [(key: String, value: JSONValue)] = []
            skipSpace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                index += 1
                return .object(members)
            }
            while true {
                skipSpace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
                    throw error("expected a string key")
                }
                let key = try string()
                skipSpace()
                try expect(UInt8(ascii: ":"))
                members.append((key, try value(depth: depth + 1)))
                skipSpace()
                if try endOrComma(UInt8(ascii: "}")) { return .object(members) }
            }
        case UInt8(ascii: "["):
            index += 1
            var items: [JSONValue] = []
            skipSpace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .array(items)
            }
            while true {
                items.append(try value(depth: depth + 1))
                skipSpace()
                if try endOrComma(UInt8(ascii: "]")) { return .array(items) }
            }
        case UInt8(ascii: "\""):
            return .string(try string())
        case UInt8(ascii: "t"):
            try literal("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try literal("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try literal("null")
            return .null
        default:
            return .number(try number())
        }
    }

    private mutating func endOrComma(_ close: UInt8) throws -> Bool {
        guard index < bytes.count else { throw error("unexpected end of input") }
        if bytes[index] == close {
            index += 1
            return true
        }
        guard bytes[index] == UInt8(ascii: ",") else {
            throw error("expected ',' or '\(Character(Unicode.Scalar(close)))'")
        }
        index += 1
        return false
    }

    private mutating func expect(_ byte: UInt8) throws {
        guard index < bytes.count, bytes[index] == byte else {
            throw error("expected '\(Character(Unicode.Scalar(byte)))'")
        }
        index += 1
    }

    private mutating func literal(_ word: String) throws {
        for byte in word.utf8 { try expect(byte) }
    }

    private mutating func number() throws -> Double {
        let start = index
        while index < bytes.count, "+-0123456789.eE".utf8.contains(bytes[index]) { index += 1 }
        guard index > start, let value = Double(String(decoding: bytes[start..<index], as: UTF8.self)), value.isFinite
        else {
            index = start
            throw error("expected a value")
        }
        return value
    }

    private mutating func string() throws -> String {
        index += 1  // opening quote
        var scalars = String.UnicodeScalarView()
        var runStart = index
        var result = ""
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                result += String(decoding: bytes[runStart..<index], as: UTF8.self)
                index += 1
                return result
            }
            if byte < 0x20 { throw error("control character in string") }
            if byte == UInt8(ascii: "\\") {
                result += String(decoding: bytes[runStart..<index], as: UTF8.self)
                index += 1
                guard index < bytes.count else { break }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""): result += "\""
                case UInt8(ascii: "\\"): result += "\\"
                case UInt8(ascii: "/"): result += "/"
                case UInt8(ascii: "b"): result += "\u{08}"
                case UInt8(ascii: "f"): result += "\u{0C}"
                case UInt8(ascii: "n"): result += "\n"
                case UInt8(ascii: "r"): result += "\r"
                case UInt8(ascii: "t"): result += "\t"
                case UInt8(ascii: "u"):
                    var code = try hex4()
                    if (0xD800..<0xDC00).contains(code), index + 1 < bytes.count,
                        bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
                    {
                        // A pair only when the second escape is a low surrogate; otherwise the high
                        // one stands alone (U+FFFD) and the second escape is read on its own.
                        let second = index
                        index += 2
                        let low = try hex4()
                        if (0xDC00..<0xE000).contains(low) {
                            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                        } else {
                            index = second
                        }
                    }
                    scalars = String.UnicodeScalarView()
                    scalars.append(Unicode.Scalar(code) ?? "\u{FFFD}")
                    result += String(scalars)
                default:
                    throw error("invalid escape")
                }
                runStart = index
                continue
            }
            index += 1
        }
        throw error("unterminated string")
    }

    private mutating func hex4() throws -> UInt32 {
        // Four hex digits exactly: UInt32(_:radix:) alone would also take a sign ("\u+12a").
        guard index + 4 <= bytes.count, !bytes[index..<index + 4].contains(where: { $0 == 0x2B || $0 == 0x2D }),
            let code = UInt32(String(decoding: bytes[index..<index + 4], as: UTF8.self), radix: 16)
        else {
            throw error("invalid \\u escape")
        }
        index += 4
        return code
    }
}
