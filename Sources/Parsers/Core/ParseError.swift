import Bluetooth

/// Why a payload was not decoded. Parsers return this instead of trapping; the message says
/// what was wrong with the bytes, e.g. `too_short: Heart Rate Measurement needs 3 bytes for a
/// uint16 heart rate, got 2`.
public struct ParseError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The class of failure; the raw values are the ones the characteristic vectors use.
    public enum Kind: String, Sendable, Hashable {
        /// Fewer bytes than the fields present need.
        case tooShort = "too_short"
        /// A fixed-length value of the wrong length.
        case length
        /// Bytes that cannot be a valid value (odd RR list, bad flags, bad object).
        case malformed
        /// A value the spec reserves for future use.
        case reservedValue = "reserved_value"
        /// A value the spec prohibits.
        case prohibitedValue = "prohibited_value"
        /// A string that is not UTF-8.
        case invalidUTF8 = "invalid_utf8"
        /// No parser recognises the advertisement or characteristic.
        case unknownFormat = "unknown_format"
        /// An encrypted frame with no bind key configured for the device.
        case missingKey = "missing_key"
        /// Decryption failed (wrong key, wrong address or corrupted frame).
        case decryptionFailed = "decryption_failed"
        /// A recognised format whose variant this parser does not decode.
        case unsupported
    }

    public var kind: Kind
    /// A human-readable explanation.
    public var message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { "\(kind.rawValue): \(message)" }

    static func tooShort(_ what: String, need: Int, got: Int) -> ParseError {
        ParseError(.tooShort, "\(what) needs \(need) bytes, got \(got)")
    }

    static func length(_ what: String, expected: Int, got: Int) -> ParseError {
        ParseError(.length, "\(what) must be \(expected) byte\(expected == 1 ? "" : "s"), got \(got)")
    }
}
