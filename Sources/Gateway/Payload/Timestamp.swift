import Parsers

/// ISO 8601 UTC timestamps with milliseconds (`2026-11-30T17:00:00.000Z`) written straight into
/// a byte buffer: integer arithmetic only (the date by `CivilDate`), no Foundation date formatter
/// per message.
public enum Timestamp {
    /// Appends the timestamp for `milliseconds` since 1970 (quoted when `quoted`).
    public static func write(milliseconds: Int64, into bytes: inout [UInt8], quoted: Bool = false) {
        let millis = Int(((milliseconds % 1000) + 1000) % 1000)
        let seconds = (milliseconds - Int64(millis)) / 1000
        var days = seconds / 86_400
        var secondOfDay = seconds % 86_400
        if secondOfDay < 0 {
            secondOfDay += 86_400
            days -= 1
        }
        let date = CivilDate(days: days)
        if quoted { bytes.append(UInt8(ascii: "\"")) }
        digits(Int(date.year), 4, &bytes)
        bytes.append(UInt8(ascii: "-"))
        digits(Int(date.month), 2, &bytes)
        bytes.append(UInt8(ascii: "-"))
        digits(Int(date.day), 2, &bytes)
        bytes.append(UInt8(ascii: "T"))
        digits(Int(secondOfDay / 3600), 2, &bytes)
        bytes.append(UInt8(ascii: ":"))
        digits(Int(secondOfDay / 60 % 60), 2, &bytes)
        bytes.append(UInt8(ascii: ":"))
        digits(Int(secondOfDay % 60), 2, &bytes)
        bytes.append(UInt8(ascii: "."))
        digits(millis, 3, &bytes)
        bytes.append(UInt8(ascii: "Z"))
        if quoted { bytes.append(UInt8(ascii: "\"")) }
    }

    /// As ``write(milliseconds:into:quoted:)``, reusing `cache`'s text of the same second: a
    /// state message per advertisement mostly falls in a second already written.
    static func write(milliseconds: Int64, into bytes: inout [UInt8], quoted: Bool, cache: inout Cache) {
        let millis = Int(((milliseconds % 1000) + 1000) % 1000)
        let second = (milliseconds - Int64(millis)) / 1000
        if second != cache.second || cache.prefix.isEmpty {
            cache.prefix.removeAll(keepingCapacity: true)
            write(milliseconds: second * 1000, into: &cache.prefix)
            cache.prefix.removeLast(4)  // "000Z": the milliseconds and the zone go per message
            cache.second = second
        }
        if quoted { bytes.append(UInt8(ascii: "\"")) }
        bytes.append(contentsOf: cache.prefix)
        digits(millis, 3, &bytes)
        bytes.append(UInt8(ascii: "Z"))
        if quoted { bytes.append(UInt8(ascii: "\"")) }
    }

    /// The text of the last second written (`2026-11-30T17:00:00.`), for
    /// ``write(milliseconds:into:quoted:cache:)``.
    struct Cache {
        var second = Int64.min
        var prefix: [UInt8] = []
    }

    /// The timestamp as a string.
    public static func string(milliseconds: Int64) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        write(milliseconds: milliseconds, into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func digits(_ value: Int, _ width: Int, _ bytes: inout [UInt8]) {
        var divisor = 1
        for _ in 1..<width { divisor *= 10 }
        var rest = max(0, value)
        while divisor > 0 {
            bytes.append(UInt8(ascii: "0") + UInt8(rest / divisor % 10))
            rest %= divisor
            divisor /= 10
        }
    }
}
