import Bluetooth
import JSON

/// How a command value becomes the bytes written to a characteristic (docs/config.md, "Commands").
///
/// Numbers are checked against the type's range (and the command's `minimum`/`maximum`); a
/// value that does not fit is an error and nothing is written.
public enum ValueEncoding: String, Sendable, CaseIterable {
    case u8, s8, u16le, u16be, s16le, s16be, u32le, u32be, s32le, s32be
    /// IEEE 754 single precision, little endian.
    case float32le
    /// `true`/`false` (or `"ON"`/`"OFF"`, 1/0) as one byte 0x01/0x00.
    case bool
    /// A hex string, e.g. `"01ff"` (spaces and colons allowed).
    case hex
    /// A base64 string.
    case base64
    /// A string written as its UTF-8 bytes.
    case utf8
    /// Any JSON value written as its compact JSON text.
    case json

    var integerLayout: (size: Int, signed: Bool, bigEndian: Bool)? {
        switch self {
        case .u8: (1, false, false)
        case .s8: (1, true, false)
        case .u16le: (2, false, false)
        case .u16be: (2, false, true)
        case .s16le: (2, true, false)
        case .s16be: (2, true, true)
        case .u32le: (4, false, false)
        case .u32be: (4, false, true)
        case .s32le: (4, true, false)
        case .s32be: (4, true, true)
        default: nil
        }
    }

    /// Every encoding's name, comma-separated (for error messages).
    static var names: String { allCases.map(\.rawValue).joined(separator: ", ") }

    var isNumeric: Bool { integerLayout != nil || self == .float32le }

    /// Encodes a JSON value; the error text says what was expected.
    public func encode(_ value: JSONValue, minimum: Double? = nil, maximum: Double? = nil) throws(CommandError)
        -> [UInt8]
    {
        if let layout = integerLayout {
            guard case .number(let number) = value, number.rounded() == number else {
                throw CommandError("\(rawValue) expects an integer, got \(Self.describe(value))")
            }
            let low = layout.signed ? -pow2(layout.size * 8 - 1) : 0
            let high = (layout.signed ? pow2(layout.size * 8 - 1) : pow2(layout.size * 8)) - 1
            let lower = max(low, minimum ?? low), upper = min(high, maximum ?? high)
            guard number >= lower, number <= upper else {
                throw CommandError(
                    "\(Self.describe(value)) is out of range for \(rawValue) (expected \(Self.text(lower))…\(Self.text(upper)))"
                )
            }
            let bits = UInt64(bitPattern: Int64(number))
            var bytes = (0..<layout.size).map { UInt8(truncatingIfNeeded: bits >> (8 * UInt64($0))) }
            if layout.bigEndian { bytes.reverse() }
            return bytes
        }
        switch self {
        case .float32le:
            guard case .number(let number) = value else {
                throw CommandError("float32le expects a number, got \(Self.describe(value))")
            }
            if let minimum, number < minimum {
                throw CommandError("\(Self.text(number)) is below the minimum \(Self.text(minimum))")
            }
            if let maximum, number > maximum {
                throw CommandError("\(Self.text(number)) is above the maximum \(Self.text(maximum))")
            }
            let bits = Float(number).bitPattern
            return (0..<4).map { UInt8(truncatingIfNeeded: bits >> (8 * UInt32($0))) }
        case .bool:
            switch value {
            case .bool(let flag): return [flag ? 1 : 0]
            case .number(1): return [1]
            case .number(0): return [0]
            case .string(let text) where ["on", "true"].contains(text.lowercased()): return [1]
            case .string(let text) where ["off", "false"].contains(text.lowercased()): return [0]
            default: throw CommandError("bool expects true/false, \"ON\"/\"OFF\" or 1/0, got \(Self.describe(value))")
            }
        case .hex:
            guard case .string(let text) = value, let bytes = Hex.decode(text) else {
                throw CommandError(
                    "hex expects a string of hex byte pairs such as \"01ff\", got \(Self.describe(value))")
            }
            return bytes
        case .base64:
            guard case .string(let text) = value, let bytes = Base64.decode(text) else {
                throw CommandError("base64 expects a base64 string, got \(Self.describe(value))")
            }
            return bytes
        case .utf8:
            guard case .string(let text) = value else {
                throw CommandError("utf8 expects a string, got \(Self.describe(value))")
            }
            return Array(text.utf8)
        case .json:
            return Array(value.serialized.utf8)
        default:
            throw CommandError("\(rawValue) cannot encode \(Self.describe(value))")
        }
    }

    /// Turns the plain-text payload of `/set/<command>` into a JSON value for this encoding:
    /// numbers for numeric encodings, the raw text for strings, JSON text for `json`.
    public func value(fromPlainText text: String) throws(CommandError) -> JSONValue {
        let trimmed = text.trimmingSpaces()
        switch self {
        case .hex, .base64, .utf8: return .string(self == .utf8 ? text : trimmed)
        case .bool:
            if let number = Double(trimmed) { return .number(number) }
            return .string(trimmed)
        case .json:
            do { return try JSONValue.parse(Array(text.utf8)) } catch {
                throw CommandError("the value is not JSON: \(error)")
            }
        default:
            guard let number = Double(trimmed), number.isFinite else {
                throw CommandError("\(rawValue) expects a number, got \"\(trimmed)\"")
            }
            return .number(number)
        }
    }

    static func describe(_ value: JSONValue) -> String {
        switch value {
        case .string(let text): "\"\(text)\""
        case .array: "an array"
        case .object: "an object"
        default: value.serialized
        }
    }

    static func text(_ number: Double) -> String { JSONValue.number(number).serialized }
}

private func pow2(_ exponent: Int) -> Double { Double(sign: .plus, exponent: exponent, significand: 1) }

extension String {
    func trimmingSpaces() -> String {
        var scalars = Substring(self)
        while let first = scalars.first, first.isWhitespace { scalars.removeFirst() }
        while let last = scalars.last, last.isWhitespace { scalars.removeLast() }
        return String(scalars)
    }
}
