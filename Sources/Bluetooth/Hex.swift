/// Hex text: the one codec for bytes and numbers written as hex digits (values in logs, MQTT
/// payloads and CLI output, UUIDs, addresses, keys) and for reading hex bytes back (config
/// values, bind keys, command values, the CLI's `write` values).
///
/// Encoding writes two digits a byte, lower case unless asked, with an optional separator
/// between bytes, straight into the string's storage. Decoding reads digit pairs, skipping the
/// separators it is given anywhere (a pair may straddle one: `0:1ff` is `01 ff`), and fails on
/// anything else and on an odd number of digits. The per-digit functions (``digit(_:uppercase:)``,
/// ``value(_:)``) serve the specialised parsers of addresses and UUIDs on the per-advertisement
/// path, which know their layout and allocate nothing.
public enum Hex {
    /// The ASCII digit of `nibble` (0–15).
    @inlinable
    public static func digit(_ nibble: UInt8, uppercase: Bool = false) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") &+ nibble : (uppercase ? UInt8(ascii: "A") : UInt8(ascii: "a")) &+ nibble &- 10
    }

    /// The value of the ASCII hex digit `byte` (`0-9`, `A-F`, `a-f`), else 0x10: bit 4 set, so
    /// a parser may OR the values of many digits together and check once.
    @inlinable
    public static func value(_ byte: UInt8) -> UInt8 {
        switch byte {
        case 0x30...0x39: byte &- 0x30
        case 0x41...0x46: byte &- 0x41 &+ 10
        case 0x61...0x66: byte &- 0x61 &+ 10
        default: 0x10
        }
    }

    /// The value of the hex digit `scalar`; nil for anything else.
    @inlinable
    public static func value(_ scalar: Unicode.Scalar) -> UInt8? {
        guard scalar.isASCII else { return nil }
        let nibble = value(UInt8(truncatingIfNeeded: scalar.value))
        return nibble < 0x10 ? nibble : nil
    }

    // MARK: Encoding

    /// Two digits a byte (`5e01`), `separator` between bytes (`5e 01` with `" "`).
    @inlinable
    public static func encode<Bytes: Collection<UInt8>>(
        _ bytes: Bytes, separator: Unicode.Scalar? = nil, uppercase: Bool = false
    ) -> String {
        let separatorByte = separator.map { UInt8(truncatingIfNeeded: $0.value) }
        precondition(separator?.isASCII ?? true, "a hex separator is one ASCII character")
        let count = bytes.count
        guard count > 0 else { return "" }
        let length = 2 * count + (separatorByte == nil ? 0 : count - 1)
        return String(unsafeUninitializedCapacity: length) { buffer in
            var position = 0
            for byte in bytes {
                if let separatorByte, position > 0 {
                    buffer[position] = separatorByte
                    position += 1
                }
                buffer[position] = digit(byte >> 4, uppercase: uppercase)
                buffer[position + 1] = digit(byte & 0xF, uppercase: uppercase)
                position += 2
            }
            return position
        }
    }

    /// The low `digits` digits of `value`, most significant first, with leading zeros
    /// (`encode(0x180F, digits: 4, uppercase: true)` is `180F`).
    @inlinable
    public static func encode(_ value: UInt64, digits: Int, uppercase: Bool = false) -> String {
        String(unsafeUninitializedCapacity: digits) { buffer in
            for index in 0..<digits {
                buffer[index] = digit(nibble(value, digits - 1 - index), uppercase: uppercase)
            }
            return digits
        }
    }

    /// Appends the low `digits` digits of `value`, most significant first, to `out`.
    @inlinable
    public static func append(_ value: UInt64, digits: Int, uppercase: Bool = false, to out: inout [UInt8]) {
        for index in stride(from: digits - 1, through: 0, by: -1) {
            out.append(digit(nibble(value, index), uppercase: uppercase))
        }
    }

    /// Nibble `index` of `value` (0: the lowest four bits).
    @inlinable
    static func nibble(_ value: UInt64, _ index: Int) -> UInt8 {
        index < 16 ? UInt8(truncatingIfNeeded: value >> UInt64(4 * index)) & 0xF : 0
    }

    // MARK: Decoding

    /// The bytes of `text`: pairs of hex digits (either case), the characters of `separators`
    /// (ASCII, not hex digits) skipped wherever they stand; with `prefixes`, a `0x` or `0X` anywhere is skipped too
    /// (`0x01,0xff`). Nil for any other character or an odd number of digits; `""` is no bytes.
    @inlinable
    public static func decode<Text: StringProtocol>(
        _ text: Text, separators: String = " :-", prefixes: Bool = false
    ) -> [UInt8]? {
        // The separators as a set of ASCII bytes, one bit each.
        var skipped: (low: UInt64, high: UInt64) = (0, 0)
        for byte in separators.utf8 where byte < 0x80 {
            if byte < 64 { skipped.low |= 1 << UInt64(byte) } else { skipped.high |= 1 << UInt64(byte - 64) }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count / 2)
        var high: UInt8?
        var iterator = text.utf8.makeIterator()
        var pending = iterator.next()
        while let byte = pending {
            pending = iterator.next()
            if prefixes, byte == UInt8(ascii: "0"), pending == UInt8(ascii: "x") || pending == UInt8(ascii: "X") {
                pending = iterator.next()
                continue
            }
            let nibble = value(byte)
            guard nibble < 0x10 else {
                let mask = byte < 64 ? skipped.low >> UInt64(byte) : skipped.high >> UInt64(byte & 63)
                guard byte < 0x80, mask & 1 == 1 else { return nil }
                continue
            }
            if let first = high {
                bytes.append(first << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
        }
        return high == nil ? bytes : nil
    }
}
