/// A validated D-Bus signature: a sequence of complete types, such as a message body's `sa{sv}as`.
///
/// Parsing follows the D-Bus specification's rules (at most 255 bytes, arrays and structs nested at
/// most 32 deep each, dict entries only directly inside arrays with a basic key, no empty structs).
/// It is a plain value: cheap to copy and `Sendable`.
public struct DBusSignature: Hashable, Sendable, CustomStringConvertible, ExpressibleByArrayLiteral {
    /// The complete types, in order.
    public var types: [DBusType]

    /// The empty signature (a message with no arguments).
    public static let empty = DBusSignature(types: [])

    public init(types: [DBusType]) { self.types = types }
    public init(arrayLiteral elements: DBusType...) { self.types = elements }

    /// Parses and validates a signature string.
    /// - Throws: ``DBusError`` `InvalidSignature` naming the offending position.
    public init(_ string: String) throws {
        var parser = Parser(bytes: Array(string.utf8), text: string)
        guard parser.bytes.count <= 255 else {
            throw DBusError(
                .invalidSignature, "signature \"\(string)\" is \(parser.bytes.count) bytes long, the limit is 255")
        }
        var types: [DBusType] = []
        while parser.position < parser.bytes.count {
            types.append(try parser.completeType(arrayDepth: 0, structDepth: 0))
        }
        self.types = types
    }

    /// The signature string, e.g. `sa{sv}as`.
    public var description: String {
        var out = ""
        for type in types { type.append(to: &out) }
        return out
    }

    private struct Parser {
        let bytes: [UInt8]
        let text: String
        var position = 0

        func fail(_ why: String) -> DBusError {
            DBusError(.invalidSignature, "signature \"\(text)\" at offset \(position): \(why)")
        }

        mutating func completeType(arrayDepth: Int, structDepth: Int) throws -> DBusType {
            guard position < bytes.count else { throw fail("a type is missing") }
            let code = bytes[position]
            position += 1
            switch code {
            case UInt8(ascii: "y"): return .byte
            case UInt8(ascii: "b"): return .boolean
            case UInt8(ascii: "n"): return .int16
            case UInt8(ascii: "q"): return .uint16
            case UInt8(ascii: "i"): return .int32
            case UInt8(ascii: "u"): return .uint32
            case UInt8(ascii: "x"): return .int64
            case UInt8(ascii: "t"): return .uint64
            case UInt8(ascii: "d"): return .double
            case UInt8(ascii: "h"): return .unixFD
            case UInt8(ascii: "s"): return .string
            case UInt8(ascii: "o"): return .objectPath
            case UInt8(ascii: "g"): return .signature
            case UInt8(ascii: "v"): return .variant
            case UInt8(ascii: "a"):
                guard arrayDepth < 32 else { throw fail("arrays nested more than 32 deep") }
                if position < bytes.count && bytes[position] == UInt8(ascii: "{") {
                    position += 1
                    let key = try completeType(arrayDepth: arrayDepth + 1, structDepth: structDepth + 1)
                    guard key.isBasic else { throw fail("a dictionary key must be a basic type, not \(key)") }
                    let value = try completeType(arrayDepth: arrayDepth + 1, structDepth: structDepth + 1)
                    guard position < bytes.count, bytes[position] == UInt8(ascii: "}") else {
                        throw fail("a dict entry has exactly two types and ends with '}'")
                    }
                    position += 1
                    return .dictionary(key: key, value: value)
                }
                return .array(try completeType(arrayDepth: arrayDepth + 1, structDepth: structDepth))
            case UInt8(ascii: "("):
                guard structDepth < 32 else { throw fail("structs nested more than 32 deep") }
                var fields: [DBusType] = []
                while true {
                    guard position < bytes.count else { throw fail("'(' without ')'") }
                    if bytes[position] == UInt8(ascii: ")") {
                        position += 1
                        break
                    }
                    fields.append(try completeType(arrayDepth: arrayDepth, structDepth: structDepth + 1))
                }
                guard !fields.isEmpty else { throw fail("empty struct") }
                return .structure(fields)
            case UInt8(ascii: "{"):
                position -= 1
                throw fail("a dict entry '{' may only appear directly after 'a'")
            default:
                position -= 1
                throw fail("'\(String(decoding: [code], as: UTF8.self))' is not a D-Bus type code")
            }
        }
    }
}
