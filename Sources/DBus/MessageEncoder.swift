internal import CDBus

/// Marshals ``DBusValue``s into a libdbus message with `DBusMessageIter`
/// (`dbus_message_iter_append_basic`, `…_open_container`, `…_close_container`,
/// `…_append_fixed_array` for `ay`).
///
/// Values are checked against their own type before anything is appended, so a malformed value
/// (an array element of the wrong type, a string with a NUL byte) is a ``DBusError`` and never a
/// half-written message or a libdbus warning.
enum MessageEncoder {
    /// Appends `values` as the body of `message` (a `DBusMessage*`).
    static func append(_ values: [DBusValue], to message: OpaquePointer) throws {
        for (index, value) in values.enumerated() {
            if let problem = value.mismatch(value.type, at: "argument \(index)") {
                throw DBusError(.invalidArgs, problem)
            }
        }
        var iter = DBusMessageIter()
        dbus_message_iter_init_append(message, &iter)
        for value in values { try append(value, to: &iter) }
    }

    static func append(_ value: DBusValue, to iter: UnsafeMutablePointer<DBusMessageIter>) throws {
        switch value {
        case .byte(var v): try basic(iter, TypeCode.byte, &v)
        case .boolean(let b):
            var v: dbus_bool_t = b ? 1 : 0
            try basic(iter, TypeCode.boolean, &v)
        case .int16(var v): try basic(iter, TypeCode.int16, &v)
        case .uint16(var v): try basic(iter, TypeCode.uint16, &v)
        case .int32(var v): try basic(iter, TypeCode.int32, &v)
        case .uint32(var v): try basic(iter, TypeCode.uint32, &v)
        case .int64(var v): try basic(iter, TypeCode.int64, &v)
        case .uint64(var v): try basic(iter, TypeCode.uint64, &v)
        case .double(var v): try basic(iter, TypeCode.double, &v)
        case .string(let s): try string(iter, TypeCode.string, s)
        case .objectPath(let p): try string(iter, TypeCode.objectPath, p.rawValue)
        case .signature(let g): try string(iter, TypeCode.signature, g.description)
        case .unixFD(let fd):
            var raw = fd.fileDescriptor  // libdbus dups it; `fd` keeps its own
            try withExtendedLifetime(fd) { try basic(iter, TypeCode.unixFD, &raw) }
        case .array(let elementType, let elements):
            try container(iter, TypeCode.array, signature: elementType.description) { sub in
                if elementType == .byte {
                    var bytes = [UInt8]()
                    bytes.reserveCapacity(elements.count)
                    for case .byte(let b) in elements { bytes.append(b) }
                    // DBUS_MAXIMUM_ARRAY_LENGTH; libdbus refuses longer arrays as if out of memory.
                    guard bytes.count <= 67_108_864 else {
                        throw DBusError(
                            .invalidArgs, "a byte array of \(bytes.count) bytes is longer than D-Bus allows (64 MiB)")
                    }
                    try bytes.withUnsafeBufferPointer { buffer in
                        var base = buffer.baseAddress
                        try LibDBus.check(
                            dbus_message_iter_append_fixed_array(
                                sub, TypeCode.byte, &base, Int32(truncatingIfNeeded: buffer.count)),
                            "dbus_message_iter_append_fixed_array")
                    }
                } else {
                    for element in elements { try append(element, to: sub) }
                }
            }
        case .dictionary(let keyType, let valueType, let entries):
            try container(iter, TypeCode.array, signature: "{\(keyType)\(valueType)}") { sub in
                for entry in entries {
                    try container(sub, TypeCode.dictEntry, signature: nil) { pair in
                        try append(entry.key, to: pair)
                        try append(entry.value, to: pair)
                    }
                }
            }
        case .structure(let fields):
            try container(iter, TypeCode.structure, signature: nil) { sub in
                for field in fields { try append(field, to: sub) }
            }
        case .variant(let inner):
            try container(iter, TypeCode.variant, signature: inner.type.description) { sub in
                try append(inner, to: sub)
            }
        }
    }

    @inline(__always)
    private static func basic<T: BitwiseCopyable>(
        _ iter: UnsafeMutablePointer<DBusMessageIter>, _ code: Int32, _ value: inout T
    ) throws {
        try LibDBus.check(dbus_message_iter_append_basic(iter, code, &value), "dbus_message_iter_append_basic")
    }

    private static func string(_ iter: UnsafeMutablePointer<DBusMessageIter>, _ code: Int32, _ text: String) throws {
        if text.utf8.contains(0) {
            throw DBusError(.invalidArgs, "D-Bus strings cannot contain NUL bytes: \(text.debugDescription)")
        }
        try text.withCString { pointer in
            var p: UnsafePointer<CChar>? = pointer
            try basic(iter, code, &p)
        }
    }

    /// Opens a container, fills it with `body`, and closes it; abandons it if `body` throws, so
    /// the message is never left with an open container.
    private static func container(
        _ iter: UnsafeMutablePointer<DBusMessageIter>, _ code: Int32, signature: String?,
        _ body: (UnsafeMutablePointer<DBusMessageIter>) throws -> Void
    ) throws {
        var sub = DBusMessageIter()
        let opened: dbus_bool_t
        if let signature {
            opened = signature.withCString { dbus_message_iter_open_container(iter, code, $0, &sub) }
        } else {
            opened = dbus_message_iter_open_container(iter, code, nil, &sub)
        }
        try LibDBus.check(opened, "dbus_message_iter_open_container")
        do {
            try body(&sub)
        } catch {
            dbus_message_iter_abandon_container(iter, &sub)
            throw error
        }
        try LibDBus.check(dbus_message_iter_close_container(iter, &sub), "dbus_message_iter_close_container")
    }
}
