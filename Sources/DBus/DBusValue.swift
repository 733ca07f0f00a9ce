/// A D-Bus value of any type, as sent or received in a message body.
///
/// Containers carry their element types, so an empty array still knows it is `as` or `a{sv}`.
/// ``type`` gives the value's complete type; ``check(_:)`` verifies it against an expected type
/// with an error that says where the mismatch is. Accessors such as ``string`` and
/// ``dictionary`` (in `DBusValue+Accessors.swift`) read values comfortably and look through
/// variants.
///
/// A number, string or path is stored in the value itself, so an `ay` of 20 bytes is one array
/// rather than 20 boxed values. So are an array and a struct (a type and an array reference: no
/// larger than a string), which saves a box per container decoded. Only a variant (which holds a
/// value) and a dictionary (two types and its entries, which would make every value larger) are
/// `indirect`, boxed on the heap.
public enum DBusValue: Hashable, Sendable {
    /// `y`
    case byte(UInt8)
    /// `b`
    case boolean(Bool)
    /// `n`
    case int16(Int16)
    /// `q`
    case uint16(UInt16)
    /// `i`
    case int32(Int32)
    /// `u`
    case uint32(UInt32)
    /// `x`
    case int64(Int64)
    /// `t`
    case uint64(UInt64)
    /// `d`
    case double(Double)
    /// `s` (must not contain NUL; checked when sending)
    case string(String)
    /// `o`
    case objectPath(DBusObjectPath)
    /// `g`
    case signature(DBusSignature)
    /// `h`: an owned descriptor (see ``DBusUnixFD`` for duplication rules).
    case unixFD(DBusUnixFD)
    /// `aT`: the element type and the elements (each must be of that type).
    case array(DBusType, [DBusValue])
    /// `a{KV}`: key and value types and the entries, in wire order.
    indirect case dictionary(key: DBusType, value: DBusType, [DBusDictionaryEntry])
    /// `(…)`: the fields (at least one).
    case structure([DBusValue])
    /// `v`: any single value, carrying its own type.
    indirect case variant(DBusValue)

    /// The value's complete type.
    public var type: DBusType {
        switch self {
        case .byte: .byte
        case .boolean: .boolean
        case .int16: .int16
        case .uint16: .uint16
        case .int32: .int32
        case .uint32: .uint32
        case .int64: .int64
        case .uint64: .uint64
        case .double: .double
        case .string: .string
        case .objectPath: .objectPath
        case .signature: .signature
        case .unixFD: .unixFD
        case .array(let element, _): .array(element)
        case .dictionary(let key, let value, _): .dictionary(key: key, value: value)
        case .structure(let fields): .structure(fields.map(\.type))
        case .variant: .variant
        }
    }

    /// Checks that the value is of `expected` type, all the way down (every array element,
    /// dictionary entry and struct field).
    /// - Throws: ``DBusError`` `InvalidArgs`, e.g. `expected a{sv}, got a{ss}` or
    ///   `[2]: expected s, got i`, naming where inside the value the mismatch is.
    public func check(_ expected: DBusType) throws {
        if let problem = mismatch(expected, at: "") {
            throw DBusError(.invalidArgs, problem)
        }
    }

    /// Checks a list of values (a message body) against a signature.
    /// - Throws: ``DBusError`` `InvalidArgs` naming the argument and the mismatch.
    public static func check(_ values: [DBusValue], against signature: DBusSignature) throws {
        guard values.count == signature.types.count else {
            throw DBusError(
                .invalidArgs,
                "expected \(signature.types.count) argument(s) of signature \"\(signature)\", got \(values.count) of signature \"\(DBusSignature(types: values.map(\.type)))\""
            )
        }
        for (index, (value, type)) in zip(values, signature.types).enumerated() {
            if let problem = value.mismatch(type, at: "argument \(index)") {
                throw DBusError(.invalidArgs, problem)
            }
        }
    }

    /// A description of the first place where the value is not of `expected`, or nil.
    func mismatch(_ expected: DBusType, at location: String) -> String? {
        func describe(_ what: String) -> String { location.isEmpty ? what : "\(location): \(what)" }
        switch (self, expected) {
        case (.byte, .byte), (.boolean, .boolean), (.int16, .int16), (.uint16, .uint16), (.int32, .int32),
            (.uint32, .uint32), (.int64, .int64), (.uint64, .uint64), (.double, .double), (.string, .string),
            (.objectPath, .objectPath), (.signature, .signature), (.unixFD, .unixFD):
            return nil
        case (.variant(let inner), .variant):
            return inner.mismatch(inner.type, at: location + "<variant>")
        case (.array(let element, let elements), .array(let expectedElement)):
            guard element == expectedElement else {
                return describe("expected \(expected), got a\(element)")
            }
            for (index, value) in elements.enumerated() {
                if let problem = value.mismatch(element, at: location + "[\(index)]") { return problem }
            }
            return nil
        case (.dictionary(let key, let value, let entries), .dictionary(let expectedKey, let expectedValue)):
            guard key == expectedKey, value == expectedValue else {
                return describe("expected \(expected), got \(self.type)")
            }
            for entry in entries {
                if let problem = entry.key.mismatch(key, at: location + "{key}") { return problem }
                if let problem = entry.value.mismatch(value, at: location + "[\(entry.key.debugKey)]") {
                    return problem
                }
            }
            return nil
        case (.structure(let fields), .structure(let expectedFields)):
            guard fields.count == expectedFields.count else {
                return describe(
                    "expected \(expected), a struct of \(expectedFields.count) fields, got \(fields.count) fields")
            }
            if fields.isEmpty { return describe("a struct needs at least one field") }
            for (index, (field, type)) in zip(fields, expectedFields).enumerated() {
                if let problem = field.mismatch(type, at: location + ".\(index)") { return problem }
            }
            return nil
        default:
            return describe("expected \(expected), got \(self.type)")
        }
    }

    private var debugKey: String {
        switch self {
        case .string(let s): "\"\(s)\""
        case .objectPath(let p): p.rawValue
        default: "\(self)"
        }
    }
}

/// One key–value pair of a D-Bus dictionary (`a{KV}`), kept in wire order.
public struct DBusDictionaryEntry: Hashable, Sendable {
    public var key: DBusValue
    public var value: DBusValue
    public init(_ key: DBusValue, _ value: DBusValue) {
        self.key = key
        self.value = value
    }
}
