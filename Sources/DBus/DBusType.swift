/// One complete D-Bus type, as a signature spells it (`s`, `a{sv}`, `(ii)`, …).
///
/// Use ``DBusSignature`` for a sequence of complete types (a message body, a struct's fields).
/// ``description`` gives the signature string of the type.
public indirect enum DBusType: Hashable, Sendable, CustomStringConvertible {
    /// `y`
    case byte
    /// `b`
    case boolean
    /// `n`
    case int16
    /// `q`
    case uint16
    /// `i`
    case int32
    /// `u`
    case uint32
    /// `x`
    case int64
    /// `t`
    case uint64
    /// `d`
    case double
    /// `h`: an index into the message's unix fds.
    case unixFD
    /// `s`
    case string
    /// `o`
    case objectPath
    /// `g`
    case signature
    /// `v`
    case variant
    /// `aT`, an array of `T` (never a dict entry; that is ``dictionary(key:value:)``).
    case array(DBusType)
    /// `a{KV}`: `K` must be a basic type.
    case dictionary(key: DBusType, value: DBusType)
    /// `(…)`: one or more fields.
    case structure([DBusType])

    /// True for the types allowed as dictionary keys (everything but containers and variants).
    public var isBasic: Bool {
        switch self {
        case .variant, .array, .dictionary, .structure: false
        default: true
        }
    }

    /// The signature string of this type, e.g. `a{sv}`.
    public var description: String {
        var out = ""
        append(to: &out)
        return out
    }

    func append(to out: inout String) {
        switch self {
        case .byte: out += "y"
        case .boolean: out += "b"
        case .int16: out += "n"
        case .uint16: out += "q"
        case .int32: out += "i"
        case .uint32: out += "u"
        case .int64: out += "x"
        case .uint64: out += "t"
        case .double: out += "d"
        case .unixFD: out += "h"
        case .string: out += "s"
        case .objectPath: out += "o"
        case .signature: out += "g"
        case .variant: out += "v"
        case .array(let element):
            out += "a"
            element.append(to: &out)
        case .dictionary(let key, let value):
            out += "a{"
            key.append(to: &out)
            value.append(to: &out)
            out += "}"
        case .structure(let fields):
            out += "("
            for field in fields { field.append(to: &out) }
            out += ")"
        }
    }

    /// Parses exactly one complete type, e.g. `DBusType("a{sv}")`.
    /// - Throws: ``DBusError`` `InvalidSignature` when `string` is not one valid complete type.
    public init(_ string: String) throws {
        let signature = try DBusSignature(string)
        guard signature.types.count == 1 else {
            throw DBusError(
                .invalidSignature, "\"\(string)\" is \(signature.types.count) complete types, expected exactly one")
        }
        self = signature.types[0]
    }
}
