internal import CDBus

/// Unmarshals a libdbus message body into ``DBusValue``s with `DBusMessageIter`
/// (`dbus_message_iter_get_arg_type`, `…_get_basic`, `…_recurse`, `…_get_fixed_array` for `ay`).
///
/// libdbus has validated the message on receipt, so the only failure left is a container whose
/// element signature cannot be parsed, reported as ``DBusError`` `InvalidSignature`.
/// Unix fds are returned by libdbus as fresh duplicates, owned by the resulting ``DBusUnixFD``.
enum MessageDecoder {
    /// All arguments of `message` (a `DBusMessage*`); long strings come from `strings` when given.
    /// Read from the wire format (``WireDecoder``) when it can, else with the iterator.
    static func values(of message: OpaquePointer, strings: StringCache? = nil) throws -> [DBusValue] {
        if let values = WireDecoder.values(of: message, strings: strings) { return values }
        return try iteratorValues(of: message, strings: strings)
    }

    /// All arguments of `message`, walked with `DBusMessageIter`.
    static func iteratorValues(of message: OpaquePointer, strings: StringCache? = nil) throws -> [DBusValue] {
        var iter = DBusMessageIter()
        guard dbus_message_iter_init(message, &iter) != 0 else { return [] }
        var out: [DBusValue] = []
        out.reserveCapacity(argumentCount(dbus_message_get_signature(message)))
        var code = dbus_message_iter_get_arg_type(&iter)
        while code != TypeCode.invalid {
            out.append(try value(&iter, code, strings))
            dbus_message_iter_next(&iter)
            code = dbus_message_iter_get_arg_type(&iter)
        }
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

    /// The number of complete types in a (valid) signature: the number of arguments, so that
    /// their array is allocated once rather than grown one argument at a time.
    static func argumentCount(_ signature: UnsafePointer<CChar>?) -> Int {
        guard var next = signature else { return 0 }
        var count = 0
        var depth = 0
        while next.pointee != 0 {
            switch UInt8(bitPattern: next.pointee) {
            case UInt8(ascii: "("), UInt8(ascii: "{"): depth += 1
            case UInt8(ascii: ")"), UInt8(ascii: "}"):
                depth -= 1
                if depth == 0 { count += 1 }
            case UInt8(ascii: "a"): break  // the element type that follows completes it
            default: if depth == 0 { count += 1 }
            }
            next += 1
        }
        return count
    }

    /// The value at `iter`, whose type code (`dbus_message_iter_get_arg_type`) is `code`: the
    /// caller has read it already to know there is a value, so it is not asked for twice.
    static func value(
        _ iter: UnsafeMutablePointer<DBusMessageIter>, _ code: Int32, _ strings: StringCache? = nil
    ) throws -> DBusValue {
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
        case TypeCode.string: return .string(string(iter, strings))
        case TypeCode.objectPath: return .objectPath(DBusObjectPath(unchecked: string(iter, strings)))
        case TypeCode.signature: return .signature(try DBusSignature(string(iter, nil)))
        case TypeCode.unixFD:
            let fd = basic(iter, Int32(-1))
            guard fd >= 0 else { throw DBusError(.failed, "message carried an invalid unix fd") }
            return .unixFD(DBusUnixFD(taking: fd))
        case TypeCode.array:
            let elementCode = dbus_message_iter_get_element_type(iter)
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(iter, &sub)
            if elementCode == TypeCode.dictEntry { return try dictionary(iter, &sub, strings) }
            if elementCode == TypeCode.byte {
                var base: UnsafePointer<UInt8>? = nil
                var count: Int32 = 0
                dbus_message_iter_get_fixed_array(&sub, &base, &count)
                let bytes = UnsafeBufferPointer(start: base, count: base == nil ? 0 : Int(count))
                return .array(.byte, bytes.map { .byte($0) })
            }
            var elements: [DBusValue] = []
            var code = dbus_message_iter_get_arg_type(&sub)
            while code != TypeCode.invalid {
                elements.append(try value(&sub, code, strings))
                dbus_message_iter_next(&sub)
                code = dbus_message_iter_get_arg_type(&sub)
            }
            // The element type without parsing the array's signature: a basic type or `v` from
            // its code, else the type of the first element (libdbus checked that every element
            // has the array's element type, and a decoded value carries its complete type).
            // Only an empty array of containers needs the signature.
            if let basicType = basicType(elementCode) { return .array(basicType, elements) }
            if let first = elements.first { return .array(first.type, elements) }
            guard case .array(let element) = try containerType(iter) else {
                throw DBusError(.invalidSignature, "array without an array signature")
            }
            return .array(element, elements)
        case TypeCode.structure:
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(iter, &sub)
            var fields: [DBusValue] = []
            var code = dbus_message_iter_get_arg_type(&sub)
            while code != TypeCode.invalid {
                fields.append(try value(&sub, code, strings))
                dbus_message_iter_next(&sub)
                code = dbus_message_iter_get_arg_type(&sub)
            }
            return .structure(fields)
        case TypeCode.variant:
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(iter, &sub)
            return .variant(try value(&sub, dbus_message_iter_get_arg_type(&sub), strings))
        default:
            throw DBusError(.invalidSignature, "unexpected D-Bus type code \(code) in message")
        }
    }

    /// The dictionary (`a{KV}`) at `iter`, whose entries `sub` iterates.
    ///
    /// The key and value types come from the first entry's type codes when the value type is
    /// basic or `v` (`a{sv}`, the shape of every property map), else from the first entry's
    /// decoded value: reading and parsing the signature string (`dbus_message_iter_get_signature`,
    /// an allocation and a parse per dictionary) is left for an empty dictionary.
    private static func dictionary(
        _ iter: UnsafeMutablePointer<DBusMessageIter>, _ sub: UnsafeMutablePointer<DBusMessageIter>,
        _ strings: StringCache?
    ) throws -> DBusValue {
        var entries: [DBusDictionaryEntry] = []
        var types: (key: DBusType, value: DBusType)? = nil
        while dbus_message_iter_get_arg_type(sub) == TypeCode.dictEntry {
            var pair = DBusMessageIter()
            dbus_message_iter_recurse(sub, &pair)
            let keyCode = dbus_message_iter_get_arg_type(&pair)
            let key = try value(&pair, keyCode, strings)
            dbus_message_iter_next(&pair)
            let valueCode = dbus_message_iter_get_arg_type(&pair)
            let value = try value(&pair, valueCode, strings)
            if types == nil {
                // A few entries are the rule (BlueZ's PropertiesChanged carries one to three):
                // room for four saves growing the array entry by entry.
                entries.reserveCapacity(4)
                guard let keyType = basicType(keyCode), keyType.isBasic else {
                    throw DBusError(.invalidSignature, "dictionary key of type code \(keyCode)")
                }
                types = (keyType, basicType(valueCode) ?? value.type)
            }
            entries.append(DBusDictionaryEntry(key, value))
            dbus_message_iter_next(sub)
        }
        if let types { return .dictionary(key: types.key, value: types.value, entries) }
        guard case .dictionary(let keyType, let valueType) = try containerType(iter) else {
            throw DBusError(.invalidSignature, "dictionary without a dictionary signature")
        }
        return .dictionary(key: keyType, value: valueType, entries)
    }

    @inline(__always)
    private static func basic<T: BitwiseCopyable>(_ iter: UnsafeMutablePointer<DBusMessageIter>, _ initial: T) -> T {
        var value = initial
        dbus_message_iter_get_basic(iter, &value)
        return value
    }

    private static func string(_ iter: UnsafeMutablePointer<DBusMessageIter>, _ strings: StringCache?) -> String {
        var pointer: UnsafePointer<CChar>? = nil
        dbus_message_iter_get_basic(iter, &pointer)
        guard let pointer else { return "" }
        return strings?.string(pointer) ?? String(cString: pointer)
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
