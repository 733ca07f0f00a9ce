extension JSONValue {
    /// Compact JSON text (RFC 8259): object keys in their stored order, integers without a
    /// fraction, other numbers in the shortest form that reads back exactly; NaN and infinities
    /// (which JSON cannot carry) become `null`.
    public var serialized: String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(64)
        write(into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends the compact JSON text to `bytes` (the allocation-light form of ``serialized``).
    public func write(into bytes: inout [UInt8]) {
        switch self {
        case .null:
            bytes.append(contentsOf: "null".utf8)
        case .bool(let value):
            bytes.append(contentsOf: (value ? "true" : "false").utf8)
        case .number(let value):
            JSONValue.writeNumber(value, into: &bytes)
        case .string(let value):
            JSONValue.writeString(value, into: &bytes)
        case .array(let items):
            bytes.append(UInt8(ascii: "["))
            for (index, item) in items.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                item.write(into: &bytes)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let members):
            bytes.append(UInt8(ascii: "{"))
            for (index, member) in members.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                JSONValue.writeString(member.key, into: &bytes)
                bytes.append(UInt8(ascii: ":"))
                member.value.write(into: &bytes)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    /// Appends a number as JSON text.
    public static func writeNumber(_ value: Double, into bytes: inout [UInt8]) {
        guard value.isFinite else {
            bytes.append(contentsOf: "null".utf8)
            return
        }
        if abs(value) < 9_007_199_254_740_992, let integer = Int64(exactly: value) {
            writeInteger(integer, into: &bytes)
        } else if writeShortDecimal(value, into: &bytes) {
            return
        } else {
            bytes.append(contentsOf: value.description.utf8)
        }
    }

    /// Appends `value` with at most three decimals when that is how it reads back exactly
    /// (`21.3`, `2.95`, `-0.125`): the text `value.description` would give — the shortest that
    /// reads back as `value` — without making a `String`. False (nothing written) otherwise.
    ///
    /// Why it is the same text: below 10^12 a double's spacing is under 0.001, so at most one
    /// decimal with `digits` places reads back as `value`, and `scaled / scale` (both exact, the
    /// division correctly rounded) equals `value` exactly when that decimal does; trying one, two,
    /// three places in turn finds the shortest.
    static func writeShortDecimal(_ value: Double, into bytes: inout [UInt8]) -> Bool {
        let magnitude = abs(value)
        guard magnitude >= 0.001, magnitude < 1e12 else { return false }
        var scale = 10.0
        for digits in 1...3 {
            let scaled = (magnitude * scale).rounded()
            if scaled / scale == magnitude, let units = UInt64(exactly: scaled) {
                if value < 0 { bytes.append(UInt8(ascii: "-")) }
                var divisor: UInt64 = 1
                for _ in 0..<digits { divisor *= 10 }
                writeDigits(units / divisor, into: &bytes)
                bytes.append(UInt8(ascii: "."))
                var fraction = units % divisor
                for _ in 0..<digits {
                    divisor /= 10
                    bytes.append(UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: fraction / divisor))
                    fraction %= divisor
                }
                return true
            }
            scale *= 10
        }
        return false
    }

    /// Appends an integer in decimal, digit by digit (no `String` made on the way: state
    /// payloads write several per message).
    public static func writeInteger(_ value: Int64, into bytes: inout [UInt8]) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        // The magnitude as unsigned, so Int64.min does not overflow.
        writeDigits(value.magnitude, into: &bytes)
    }

    private static func writeDigits(_ value: UInt64, into bytes: inout [UInt8]) {
        var rest = value
        var divisor: UInt64 = 1
        while rest / divisor >= 10 { divisor *= 10 }
        while divisor > 0 {
            bytes.append(UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest / divisor))
            rest %= divisor
            divisor /= 10
        }
    }

    /// Appends a string as a quoted, escaped JSON string.
    public static func writeString(_ value: String, into bytes: inout [UInt8]) {
        let backslash = UInt8(ascii: "\\")
        bytes.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""), backslash:
                bytes.append(backslash)
                bytes.append(byte)
            case 0x0A:
                bytes.append(backslash)
                bytes.append(UInt8(ascii: "n"))
            case 0x0D:
                bytes.append(backslash)
                bytes.append(UInt8(ascii: "r"))
            case 0x09:
                bytes.append(backslash)
                bytes.append(UInt8(ascii: "t"))
            case 0..<0x20:
                // \u00XX with lower-case hex digits, computed: no table to allocate per call.
                bytes.append(contentsOf: "\\u00".utf8)
                bytes.append(hexDigit(byte >> 4))
                bytes.append(hexDigit(byte & 0x0F))
            default:
                bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }

    /// The member `key` of an object (the last one when repeated), else nil.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.last { $0.key == key }?.value
    }
}

/// Durations written as text in configuration and on the command line.
public enum DurationText {
    /// The longest duration accepted anywhere (config.json, command-line options): 365 days.
    /// Nothing a gateway waits for is longer, and a bound keeps every deadline and sleep computed
    /// from a duration far from overflow.
    public static let maximumSeconds: Double = 365 * 86400

    /// How the bound reads in error messages.
    public static let maximumText = "365 days"

    /// Seconds for "500ms", "30s", "5m", "1h", "1.5s" or a bare number of seconds, from 0 to
    /// ``maximumSeconds``; nil otherwise.
    public static func seconds(_ text: String) -> Double? {
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600)]
        for (suffix, factor) in units where text.hasSuffix(suffix) {
            guard let value = Double(text.dropLast(suffix.count)) else { return nil }
            return bounded(value * factor)
        }
        return Double(text).flatMap(bounded)
    }

    /// `seconds` when it is a duration this program accepts (finite, 0...``maximumSeconds``).
    public static func bounded(_ seconds: Double) -> Double? {
        seconds >= 0 && seconds <= maximumSeconds ? seconds : nil
    }
}
