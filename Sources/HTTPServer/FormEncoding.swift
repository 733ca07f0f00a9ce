/// `application/x-www-form-urlencoded` (the WHATWG URL standard's form encoding), for query
/// strings and form bodies: `name=value` pairs separated by `&`, `+` for a space, `%XX` for a
/// byte. Untrusted input: a malformed escape or a result that is not UTF-8 makes the whole text
/// invalid (nil), and more than ``maxFields`` fields are refused, so a request cannot make us
/// build an unbounded list.
public enum FormEncoding {
    /// The most fields one query string or form body may have.
    public static let maxFields = 64

    /// The fields of `text`, in order; nil when malformed or with more than ``maxFields``.
    public static func parse(_ text: ArraySlice<UInt8>) -> [FormField]? {
        var fields: [FormField] = []
        for part in text.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            guard fields.count < maxFields else { return nil }
            let equals = part.firstIndex(of: UInt8(ascii: "="))
            let name = part[..<(equals ?? part.endIndex)]
            let value = equals.map { part[part.index(after: $0)...] } ?? []
            guard let decodedName = decode(name), let decodedValue = decode(value) else { return nil }
            fields.append(FormField(decodedName, decodedValue))
        }
        return fields
    }

    /// `text` as UTF-8 bytes (``parse(_:)``).
    public static func parse(_ text: String) -> [FormField]? { parse(Array(text.utf8)[...]) }

    /// One percent-decoded component; nil for a bad escape or bytes that are not UTF-8.
    public static func decode(_ bytes: ArraySlice<UInt8>) -> String? {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let byte = bytes[index]
            if byte == UInt8(ascii: "+") {
                out.append(UInt8(ascii: " "))
            } else if byte == UInt8(ascii: "%") {
                guard bytes.endIndex - index >= 3, let high = hexValue(bytes[index + 1]),
                    let low = hexValue(bytes[index + 2])
                else { return nil }
                out.append(high << 4 | low)
                index += 2
            } else {
                out.append(byte)
            }
            index += 1
        }
        return String(validating: out, as: UTF8.self)
    }

    /// `text` encoded for a query string or form body (unreserved characters as they are).
    public static func encode(_ text: String) -> String {
        var out: [UInt8] = []
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                out.append(byte)
            default:
                let digits = Array("0123456789ABCDEF".utf8)
                out += [UInt8(ascii: "%"), digits[Int(byte >> 4)], digits[Int(byte & 15)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// The request target of an HTTP request line in origin form (`/path?query`), as sent: the path
/// (kept as sent, it only has to equal a route) and the query string's fields.
public struct RequestTarget: Sendable, Equatable {
    public var path: String
    public var query: [FormField]

    /// nil when the target is not in origin form, has a fragment or control characters, or its
    /// query string is malformed (``FormEncoding/parse(_:)``).
    public init?(_ target: String) {
        let bytes = Array(target.utf8)
        guard bytes.first == UInt8(ascii: "/"), !bytes.contains(where: { $0 < 0x21 || $0 == 0x7F || $0 == 0x23 })
        else { return nil }
        let mark = bytes.firstIndex(of: UInt8(ascii: "?"))
        guard let path = String(validating: bytes[..<(mark ?? bytes.endIndex)], as: UTF8.self) else { return nil }
        self.path = path
        if let mark {
            guard let query = FormEncoding.parse(bytes[(mark + 1)...]) else { return nil }
            self.query = query
        } else {
            query = []
        }
    }
}

/// The `Cookie` request header (RFC 6265 §5.4): `name=value` pairs separated by `;`. Pairs without
/// `=` are skipped; at most ``FormEncoding/maxFields`` are read.
public enum Cookies {
    public static func parse(_ header: String) -> [FormField] {
        var cookies: [FormField] = []
        for part in header.split(separator: ";") {
            guard cookies.count < FormEncoding.maxFields else { break }
            guard let equals = part.firstIndex(of: "=") else { continue }
            let name = part[..<equals].trimmingSpaces
            var value = part[part.index(after: equals)...].trimmingSpaces
            if value.count >= 2, value.first == "\"", value.last == "\"" { value = value.dropFirst().dropLast() }
            guard !name.isEmpty else { continue }
            cookies.append(FormField(String(name), String(value)))
        }
        return cookies
    }
}
