internal import CDBus

/// Unmarshals a libdbus message body into ``DBusValue``s with `DBusMessageIter`
/// (`dbus_message_iter_get_arg_type`, `…_get_basic`, `…_recurse`, `…_get_fixed_array` for `ay`).
///
/// libdbus has validated the message on receipt, so the only failure left is a container whose
/// element signature cannot be parsed, reported as ``DBusError`` `InvalidSignature`.
/// Unix fds are returned by libdbus as fresh duplicates, owned by the resulting ``DBusUnixFD``.
enum MessageDecoder {
    /// All arguments of `message` (a `DBusMessage*`).
    static func values(of message: OpaquePointer) throws -> [DBusValue] {
        var iter = DBusMessageIter()
        guard dbus_message_iter_init(message, &iter) != 0 else { return [] }
        var out: [DBusValue] = []
        repeat {
            out.append(try value(&iter))
        } while dbus_message_iter_next(&iter) != 0
        return out
    }

    /// The first argument when it is a string-like value (`s`, `o`, `g`), without decoding the
    /// rest; used for `arg0` matching and error messages.
    static func firstString(of message: OpaquePointer) -> String? {
        var iter = DBusMessageIter()
        guard dbus_message_iter_init(message, &iter) != 0 else { return nil }
        let code = dbus_message_iter_get_arg_type(&iter)
        guard code == TypeCode.string || code == TypeCode.objectPath || code == TypeCode.signature else { return nil }
        var pointer: UnsafePointer<CChar>? = nil
        dbus_message_iter_get_basic(&iter, &pointer)
        return pointer.map { String(cString: $0) }
    }

    static func value(_ iter: UnsafeMutablePointer<DBusMessageIter>) throws -> DBusValue {
        let code = dbus_message_iter_get_arg_type(iter)
        switch code {
        case TypeCode.byte: return .byte(basic(iter, UInt8(0)))
        case TypeCode.boolean: return .boolean(basic(iter, dbus_bool_t(0)) != 0)
        case TypeCode.int16: return .int16(basic(iter, Int16(0)))
        case TypeCode.uint16: return .uint16(basic(iter, UInt16(0)))
        case TypeCode.int32: return .int32(basic(iter, Int32(0)))
        case TypeCode.uint32: return .uint32(basic(iter, UInt32(0)))
        case TypeCode.int64: return .int64(basic(iter, Int64(0)))
        case TypeCode.uint64: return .uint64(basic(iter, UInt64(0)))
        case TypeCode.double: return .double(basic(iter, Double(0)))
        case TypeCode.string: return .string(string(iter))
        case TypeCode.objectPath: return .objectPath(DBusObjectPath(unchecked: string(iter)))
        case TypeCode.signature: return .signature(try DBusSignature(string(iter)))
        case TypeCode.unixFD:
            let fd = basic(iter, Int32(-1))
            guard fd >= 0 else { throw DBusError(.failed, "message carried an invalid unix fd") }
            return .unixFD(DBusUnixFD(taking: fd))
        case TypeCode.array:
            let elementCode = dbus_message_iter_get_element_type(iter)
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(iter, &sub)
            if elementCode == TypeCode.dictEntry {
                guard case .dictionary(let keyType, let valueType) = try containerType(iter) else {
                    throw DBusError(.invalidSignature, "dictionary without a dictionary signature")
                }
                var entries: [DBusDictionaryEntry] = []
                while dbus_message_iter_get_arg_type(&sub) == TypeCode.dictEntry {
                    var pair = DBusMessageIter()
                    dbus_message_iter_recurse(&sub, &pair)
                    let key = try value(&pair)
                    dbus_message_iter_next(&pair)
                    entries.append(DBusDictionaryEntry(key, try value(&pair)))
                    dbus_message_iter_next(&sub)
                }
                return .dictionary(key: keyType, value: valueType, entries)
            }
            if elementCode == TypeCode.byte {
                var base: UnsafePointer<UInt8>? = nil
                var count: Int32 = 0
                dbus_message_iter_get_fixed_array(&sub, &base, &count)
                let bytes = UnsafeBufferPointer(start: base, count: base == nil ? 0 : Int(count))
                return .array(.byte, bytes.map { .byte($0) })
            }
            let elementType: DBusType
            if let basicType = basicType(elementCode) {
                elementType = basicType
            } else {
                guard case .array(let element) = try containerType(iter) else {
                    throw DBusError(.invalidSignature, "array without an array signature")
                }
                elementType = element
            }
            var elements: [DBusValue] = []
            while dbus_message_iter_get_arg_type(&sub) != TypeCode.invalid {
                elements.append(try value(&sub))
                dbus_message_iter_next(&sub)
            }
            return .array(elementType, elements)
        case TypeCode.structure:
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(iter, &sub)
            var fields: [DBusValue] = []
            while dbus_message_iter_get_arg_type(&sub) != TypeCode.invalid {
                fields.append(try value(&sub))
                dbus_message_iter_next(&sub)
            }
            return .structure(fields)
        case TypeCode.variant:
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(iter, &sub)
            return .variant(try value(&sub))
        default:
            throw DBusError(.invalidSignature, "unexpected D-Bus type code \(code) in message")
        }
    }

    @inline(__always)
    private static func basic<T: BitwiseCopyable>(_ iter: UnsafeMutablePointer<DBusMessageIter>, _ initial: T) -> T {
        var value = initial
        dbus_message_iter_get_basic(iter, &value)
        return value
    }

    private static func string(_ iter: UnsafeMutablePointer<DBusMessageIter>) -> String {
        var pointer: UnsafePointer<CChar>? = nil
        dbus_message_iter_get_basic(iter, &pointer)
        return pointer.map { String(cString: $0) } ?? ""
    }

    /// The full type of the container at `iter` (`dbus_message_iter_get_signature`).
    private static func containerType(_ iter: UnsafeMutablePointer<DBusMessageIter>) throws -> DBusType {
        let raw = try LibDBus.check(dbus_message_iter_get_signature(iter), "dbus_message_iter_get_signature")
        defer { dbus_free(raw) }
        return try DBusType(String(cString: raw))
    }

    private static func basicType(_ code: Int32) -> DBusType? {
        switch code {
        case TypeCode.byte: .byte
        case TypeCode.boolean: .boolean
        case TypeCode.int16: .int16
        case TypeCode.uint16: .uint16
        case TypeCode.int32: .int32
        case TypeCode.uint32: .uint32
        case TypeCode.int64: .int64
        case TypeCode.uint64: .uint64
        case TypeCode.double: .double
        case TypeCode.string: .string
        case TypeCode.objectPath: .objectPath
        case TypeCode.signature: .signature
        case TypeCode.unixFD: .unixFD
        case TypeCode.variant: .variant
        default: nil
        }
    }
}
