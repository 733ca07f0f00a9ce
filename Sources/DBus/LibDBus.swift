internal import CDBus

/// The one place where libdbus results are checked and turned into ``DBusError``s.
///
/// libdbus reports failure in three ways: a `DBusError` out-parameter (name + message), a
/// `dbus_bool_t` that is false only when it ran out of memory, and a NULL pointer (out of memory
/// or invalid arguments). Each has a helper here, so call sites read as one line per C call.
enum LibDBus {
    /// Calls `body` with an initialised C `DBusError`; if libdbus set it, frees it and throws it as
    /// ``DBusError`` (keeping libdbus's name and message).
    static func withError<T>(_ body: (UnsafeMutablePointer<CDBus.DBusError>) -> T) throws -> T {
        var error = CDBus.DBusError()
        dbus_error_init(&error)
        let result = body(&error)
        if dbus_error_is_set(&error) != 0 {
            let name = error.name.map { String(cString: $0) } ?? DBusError.Name.failed.rawValue
            let message = error.message.map { String(cString: $0) } ?? ""
            dbus_error_free(&error)
            throw DBusError(DBusError.Name(name), message)
        }
        return result
    }

    /// Throws `NoMemory` when a libdbus call that only fails for lack of memory returned false.
    @inline(__always)
    static func check(_ ok: dbus_bool_t, _ function: StaticString) throws {
        if ok == 0 { throw DBusError(.noMemory, "\(function) failed: out of memory") }
    }

    /// Unwraps a pointer returned by `function`, throwing `NoMemory` for NULL.
    @inline(__always)
    static func check<P>(_ pointer: P?, _ function: StaticString) throws -> P {
        guard let pointer else { throw DBusError(.noMemory, "\(function) returned NULL") }
        return pointer
    }

    /// Validates a bus name, interface or member name with libdbus's own rules
    /// (`dbus_validate_bus_name`, `dbus_validate_interface`, `dbus_validate_member`,
    /// `dbus_validate_error_name`), so libdbus never sees an argument it would reject with a warning.
    static func validate(_ name: String, as kind: NameKind) throws {
        try withError { error in
            _ = name.withCString { text in
                switch kind {
                case .busName: dbus_validate_bus_name(text, error)
                case .interface: dbus_validate_interface(text, error)
                case .member: dbus_validate_member(text, error)
                case .errorName: dbus_validate_error_name(text, error)
                }
            }
        }
        if name.utf8.contains(0) { throw DBusError(.invalidArgs, "\(kind) contains a NUL byte") }
    }

    enum NameKind: CustomStringConvertible {
        case busName, interface, member, errorName
        var description: String {
            switch self {
            case .busName: "bus name"
            case .interface: "interface name"
            case .member: "member name"
            case .errorName: "error name"
            }
        }
    }
}

/// D-Bus type codes (`DBUS_TYPE_*`), read from the C shim because Swift cannot import the
/// character-literal macros.
enum TypeCode {
    static var invalid: Int32 { gattway_dbus_type_invalid() }
    static var byte: Int32 { gattway_dbus_type_byte() }
    static var boolean: Int32 { gattway_dbus_type_boolean() }
    static var int16: Int32 { gattway_dbus_type_int16() }
    static var uint16: Int32 { gattway_dbus_type_uint16() }
    static var int32: Int32 { gattway_dbus_type_int32() }
    static var uint32: Int32 { gattway_dbus_type_uint32() }
    static var int64: Int32 { gattway_dbus_type_int64() }
    static var uint64: Int32 { gattway_dbus_type_uint64() }
    static var double: Int32 { gattway_dbus_type_double() }
    static var string: Int32 { gattway_dbus_type_string() }
    static var objectPath: Int32 { gattway_dbus_type_object_path() }
    static var signature: Int32 { gattway_dbus_type_signature() }
    static var unixFD: Int32 { gattway_dbus_type_unix_fd() }
    static var array: Int32 { gattway_dbus_type_array() }
    static var variant: Int32 { gattway_dbus_type_variant() }
    static var structure: Int32 { gattway_dbus_type_struct() }
    static var dictEntry: Int32 { gattway_dbus_type_dict_entry() }
}
