// Reading and building values comfortably. Every accessor looks through variants (a BlueZ
// property `a{sv}` entry reads as `props["Name"]?.string`) and returns nil for other types.

extension DBusValue {
    /// The value inside any number of variants.
    public var unwrapped: DBusValue {
        var value = self
        while case .variant(let inner) = value { value = inner }
        return value
    }

    /// `s` as a `String`.
    public var string: String? {
        if case .string(let s) = unwrapped { return s }
        return nil
    }

    /// `o` as a path.
    public var objectPath: DBusObjectPath? {
        if case .objectPath(let p) = unwrapped { return p }
        return nil
    }

    /// `g` as a signature.
    public var signature: DBusSignature? {
        if case .signature(let g) = unwrapped { return g }
        return nil
    }

    /// `b`.
    public var bool: Bool? {
        if case .boolean(let b) = unwrapped { return b }
        return nil
    }

    /// `y`.
    public var uint8: UInt8? {
        if case .byte(let v) = unwrapped { return v }
        return nil
    }

    /// `n`.
    public var int16: Int16? {
        if case .int16(let v) = unwrapped { return v }
        return nil
    }

    /// `q`.
    public var uint16: UInt16? {
        if case .uint16(let v) = unwrapped { return v }
        return nil
    }

    /// `i`.
    public var int32: Int32? {
        if case .int32(let v) = unwrapped { return v }
        return nil
    }

    /// `u`.
    public var uint32: UInt32? {
        if case .uint32(let v) = unwrapped { return v }
        return nil
    }

    /// `x`.
    public var int64: Int64? {
        if case .int64(let v) = unwrapped { return v }
        return nil
    }

    /// `t`.
    public var uint64: UInt64? {
        if case .uint64(let v) = unwrapped { return v }
        return nil
    }

    /// `d`.
    public var double: Double? {
        if case .double(let v) = unwrapped { return v }
        return nil
    }

    /// Any integer type (`y n q i u x`, and `t` when it fits) as `Int`.
    public var int: Int? {
        switch unwrapped {
        case .byte(let v): Int(v)
        case .int16(let v): Int(v)
        case .uint16(let v): Int(v)
        case .int32(let v): Int(v)
        case .uint32(let v): Int(v)
        case .int64(let v): Int(v)
        case .uint64(let v): Int(exactly: v)
        default: nil
        }
    }

    /// `h`.
    public var unixFD: DBusUnixFD? {
        if case .unixFD(let fd) = unwrapped { return fd }
        return nil
    }

    /// The elements of any array (not dictionaries; see ``entries``).
    public var array: [DBusValue]? {
        if case .array(_, let elements) = unwrapped { return elements }
        return nil
    }

    /// `ay` as bytes.
    public var bytes: [UInt8]? {
        guard case .array(.byte, let elements) = unwrapped else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(elements.count)
        for case .byte(let b) in elements { out.append(b) }
        return out
    }

    /// `as`, `ao` or `ag` as strings.
    public var strings: [String]? {
        guard case .array(let type, let elements) = unwrapped,
            type == .string || type == .objectPath || type == .signature
        else { return nil }
        return elements.compactMap(\.stringLike)
    }

    /// The entries of any dictionary, in wire order.
    public var entries: [DBusDictionaryEntry]? {
        if case .dictionary(_, _, let entries) = unwrapped { return entries }
        return nil
    }

    /// A dictionary with `s`, `o` or `g` keys (e.g. `a{sv}`, `a{oa{sa{sv}}}`) keyed by the key's
    /// text. Values stay as they are (a variant stays a variant; the accessors look through it).
    /// When a key repeats, the last entry wins.
    public var dictionary: [String: DBusValue]? {
        guard case .dictionary(let keyType, _, let entries) = unwrapped,
            keyType == .string || keyType == .objectPath || keyType == .signature
        else { return nil }
        var out: [String: DBusValue] = [:]
        out.reserveCapacity(entries.count)
        for entry in entries {
            if let key = entry.key.stringLike { out[key] = entry.value }
        }
        return out
    }

    /// The fields of a struct.
    public var fields: [DBusValue]? {
        if case .structure(let fields) = unwrapped { return fields }
        return nil
    }

    /// Looks `key` up in a dictionary with string-like keys (linear scan, no allocation).
    public subscript(key: String) -> DBusValue? {
        guard case .dictionary(_, _, let entries) = unwrapped else { return nil }
        for entry in entries where entry.key.stringLike == key { return entry.value }
        return nil
    }

    /// The text of an `s`, `o` or `g` (not through variants): what ``dictionary`` keys an entry
    /// by, for code that reads a dictionary's entries in place (package-wide).
    package var stringLike: String? {
        switch self {
        case .string(let s): s
        case .objectPath(let p): p.rawValue
        case .signature(let g): g.description
        default: nil
        }
    }
}

// MARK: Building values

extension DBusValue {
    /// `as`.
    public static func strings(_ strings: [String]) -> DBusValue {
        .array(.string, strings.map { .string($0) })
    }

    /// `ao`.
    public static func objectPaths(_ paths: [DBusObjectPath]) -> DBusValue {
        .array(.objectPath, paths.map { .objectPath($0) })
    }

    /// `ay`.
    public static func bytes(_ bytes: some Sequence<UInt8>) -> DBusValue {
        .array(.byte, bytes.map { .byte($0) })
    }

    /// `a{sv}` from a Swift dictionary, keys sorted so the wire order is reproducible. Values that
    /// are not variants yet are wrapped in one.
    public static func variantDictionary(_ dictionary: [String: DBusValue]) -> DBusValue {
        .variantDictionary(dictionary.sorted { $0.key < $1.key })
    }

    /// `a{sv}` from pairs, in the given order. Values that are not variants yet are wrapped in one.
    public static func variantDictionary(_ pairs: [(String, DBusValue)]) -> DBusValue {
        .dictionary(
            key: .string, value: .variant,
            pairs.map { key, value in
                if case .variant = value { return DBusDictionaryEntry(.string(key), value) }
                return DBusDictionaryEntry(.string(key), .variant(value))
            })
    }

    /// A dictionary of `key`/`value` types from pairs, in the given order (not checked here;
    /// sending checks every entry against the types).
    public static func dictionary(
        key: DBusType, value: DBusType, pairs: [(DBusValue, DBusValue)]
    ) -> DBusValue {
        .dictionary(key: key, value: value, pairs.map { DBusDictionaryEntry($0.0, $0.1) })
    }
}

extension DBusValue: ExpressibleByStringLiteral {
    /// A string literal (also an interpolated one) is an `s`.
    public init(stringLiteral value: String) { self = .string(value) }
}

extension DBusValue: ExpressibleByStringInterpolation {}

extension DBusValue: ExpressibleByIntegerLiteral {
    /// An integer literal is an `i` (`Int32`).
    public init(integerLiteral value: Int32) { self = .int32(value) }
}

extension DBusValue: ExpressibleByBooleanLiteral {
    /// A boolean literal is a `b`.
    public init(booleanLiteral value: Bool) { self = .boolean(value) }
}

extension DBusValue: ExpressibleByFloatLiteral {
    /// A floating-point literal is a `d`.
    public init(floatLiteral value: Double) { self = .double(value) }
}

extension DBusValue: CustomStringConvertible {
    /// A compact rendering in the style of `busctl` / GVariant text, e.g. `{"Name": <"x">}`.
    public var description: String {
        switch self {
        case .byte(let v): "byte \(v)"
        case .boolean(let v): "\(v)"
        case .int16(let v): "int16 \(v)"
        case .uint16(let v): "uint16 \(v)"
        case .int32(let v): "\(v)"
        case .uint32(let v): "uint32 \(v)"
        case .int64(let v): "int64 \(v)"
        case .uint64(let v): "uint64 \(v)"
        case .double(let v): "\(v)"
        case .string(let s): "\"\(s)\""
        case .objectPath(let p): "objectpath \"\(p)\""
        case .signature(let g): "signature \"\(g)\""
        case .unixFD(let fd): "handle \(fd.fileDescriptor)"
        case .array(let type, let elements):
            elements.isEmpty ? "@a\(type) []" : "[" + elements.map(\.description).joined(separator: ", ") + "]"
        case .dictionary(let key, let value, let entries):
            entries.isEmpty
                ? "@a{\(key)\(value)} {}"
                : "{" + entries.map { "\($0.key): \($0.value)" }.joined(separator: ", ") + "}"
        case .structure(let fields): "(" + fields.map(\.description).joined(separator: ", ") + ")"
        case .variant(let inner): "<\(inner)>"
        }
    }
}
