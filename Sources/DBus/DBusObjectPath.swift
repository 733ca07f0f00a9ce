#if canImport(Glibc)
    import Glibc
#endif

/// A validated D-Bus object path such as `/org/bluez/hci0` (`dbus_validate_path` rules: starts with
/// `/`, elements of `[A-Za-z0-9_]` separated by single `/`, no trailing `/` except the root).
public struct DBusObjectPath: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
    public let rawValue: String

    /// The root path `/`.
    public static let root = DBusObjectPath(unchecked: "/")

    /// Validates `rawValue`; nil when it is not an object path.
    public init?(rawValue: String) {
        guard Self.isValid(rawValue) else { return nil }
        self.rawValue = rawValue
    }

    /// Validates `string`.
    /// - Throws: ``DBusError`` `InvalidArgs` saying what is wrong.
    public init(_ string: String) throws {
        guard Self.isValid(string) else {
            throw DBusError(.invalidArgs, "\"\(string)\" is not a D-Bus object path (expected e.g. /org/bluez/hci0)")
        }
        rawValue = string
    }

    init(unchecked: String) { rawValue = unchecked }

    public var description: String { rawValue }

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }

    /// This path with `element` appended, e.g. `/org/bluez` + `hci0`.
    /// - Throws: ``DBusError`` `InvalidArgs` when `element` is empty or contains other than `[A-Za-z0-9_]`.
    public func appending(_ element: String) throws -> DBusObjectPath {
        try DBusObjectPath(rawValue == "/" ? "/" + element : rawValue + "/" + element)
    }

    /// The parent path; nil for `/`.
    public var parent: DBusObjectPath? {
        guard rawValue != "/" else { return nil }
        let utf8 = rawValue.utf8
        guard let slash = utf8.lastIndex(of: UInt8(ascii: "/")) else { return nil }
        if slash == utf8.startIndex { return .root }
        return DBusObjectPath(unchecked: String(rawValue[..<slash]))
    }

    /// Whether `parent` is this path's ``parent``, found without building the parent's string:
    /// BlueZ's central asks it of every device path for every advertisement report.
    package func isChild(of parent: DBusObjectPath) -> Bool {
        // A path is valid ASCII, so its parent is the bytes before its last slash (`/` when that
        // is the first byte): `parent` + `/` + an element without a slash.
        let prefixCount = parent.rawValue == "/" ? 0 : parent.rawValue.utf8.count
        if prefixCount == 0 && parent.rawValue != "/" { return false }  // no path's parent is ""
        let found = rawValue.utf8.withContiguousStorageIfAvailable { path -> Bool? in
            guard path.count > prefixCount + 1, path[prefixCount] == UInt8(ascii: "/"),
                !path[(prefixCount + 1)...].contains(UInt8(ascii: "/"))
            else { return false }
            if prefixCount == 0 { return true }
            return parent.rawValue.utf8.withContiguousStorageIfAvailable {
                memcmp(path.baseAddress!, $0.baseAddress!, prefixCount) == 0
            }
        }
        // Both strings are native, hence contiguous; the generic way for any other kind.
        return (found ?? nil) ?? (self.parent == parent)
    }

    /// True when `self` is `ancestor` or lies below it (`path_namespace` semantics).
    public func isDescendant(of ancestor: DBusObjectPath) -> Bool {
        if ancestor.rawValue == "/" || ancestor == self { return true }
        return rawValue.hasPrefix(ancestor.rawValue)
            && rawValue.utf8.dropFirst(ancestor.rawValue.utf8.count).first == UInt8(ascii: "/")
    }

    static func isValid(_ string: String) -> Bool {
        let bytes = string.utf8
        guard bytes.first == UInt8(ascii: "/") else { return false }
        if bytes.count == 1 { return true }
        var previousSlash = false
        for byte in bytes {
            if byte == UInt8(ascii: "/") {
                if previousSlash { return false }
                previousSlash = true
            } else {
                previousSlash = false
                let ok =
                    (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A)
                    || (byte >= 0x61 && byte <= 0x7A) || byte == UInt8(ascii: "_")
                if !ok { return false }
            }
        }
        return !previousSlash
    }
}

extension DBusObjectPath: ExpressibleByStringLiteral {
    /// A path literal. Literals are checked at run time: an invalid one traps, as a programming
    /// error (never used for input from the bus; use ``init(_:)`` there).
    public init(stringLiteral value: String) {
        precondition(Self.isValid(value), "\"\(value)\" is not a D-Bus object path")
        rawValue = value
    }
}
