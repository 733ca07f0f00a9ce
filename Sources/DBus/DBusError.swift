/// The one error type of the `DBus` module: a D-Bus error name and a human-readable message.
///
/// Errors that come from the bus (an error reply, libdbus's `DBusError`) keep the name the peer
/// sent, e.g. `org.bluez.Error.Failed: le-connection-abort-by-local`. Errors found locally (a bad
/// signature, a value that does not match its type, a closed connection) use the standard
/// `org.freedesktop.DBus.Error.*` name that a D-Bus peer would have used for the same problem, so
/// callers match on one vocabulary. Handlers of exported methods throw it to send an error reply.
public struct DBusError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A D-Bus error name such as `org.freedesktop.DBus.Error.UnknownMethod` (an open set).
    public struct Name: RawRepresentable, Hashable, Sendable, CustomStringConvertible,
        ExpressibleByStringLiteral
    {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public init(_ rawValue: String) { self.rawValue = rawValue }
        public init(stringLiteral value: String) { self.rawValue = value }
        public var description: String { rawValue }

        /// `DBUS_ERROR_FAILED`: a generic failure.
        public static let failed = Name("org.freedesktop.DBus.Error.Failed")
        /// `DBUS_ERROR_NO_MEMORY`: libdbus could not allocate.
        public static let noMemory = Name("org.freedesktop.DBus.Error.NoMemory")
        /// `DBUS_ERROR_NO_REPLY`: a method call timed out (or the peer left without replying).
        public static let noReply = Name("org.freedesktop.DBus.Error.NoReply")
        /// `DBUS_ERROR_TIMEOUT`: an operation other than a call timed out.
        public static let timeout = Name("org.freedesktop.DBus.Error.Timeout")
        /// `DBUS_ERROR_DISCONNECTED`: the connection is closed.
        public static let disconnected = Name("org.freedesktop.DBus.Error.Disconnected")
        /// `DBUS_ERROR_BAD_ADDRESS`: a bus address could not be parsed.
        public static let badAddress = Name("org.freedesktop.DBus.Error.BadAddress")
        /// `DBUS_ERROR_SERVICE_UNKNOWN`: no connection owns the destination name.
        public static let serviceUnknown = Name("org.freedesktop.DBus.Error.ServiceUnknown")
        /// `DBUS_ERROR_NAME_HAS_NO_OWNER`: the name has no owner.
        public static let nameHasNoOwner = Name("org.freedesktop.DBus.Error.NameHasNoOwner")
        /// `DBUS_ERROR_ACCESS_DENIED`: the bus policy refused the operation.
        public static let accessDenied = Name("org.freedesktop.DBus.Error.AccessDenied")
        /// `DBUS_ERROR_INVALID_ARGS`: arguments or values do not fit what was expected.
        public static let invalidArgs = Name("org.freedesktop.DBus.Error.InvalidArgs")
        /// `DBUS_ERROR_INVALID_SIGNATURE`: a signature string is malformed or the wrong one.
        public static let invalidSignature = Name("org.freedesktop.DBus.Error.InvalidSignature")
        /// `DBUS_ERROR_UNKNOWN_METHOD`: the object has no such method.
        public static let unknownMethod = Name("org.freedesktop.DBus.Error.UnknownMethod")
        /// `DBUS_ERROR_UNKNOWN_OBJECT`: no object is exported at the path.
        public static let unknownObject = Name("org.freedesktop.DBus.Error.UnknownObject")
        /// `DBUS_ERROR_UNKNOWN_INTERFACE`: the object does not implement the interface.
        public static let unknownInterface = Name("org.freedesktop.DBus.Error.UnknownInterface")
        /// `DBUS_ERROR_UNKNOWN_PROPERTY`: the interface has no such property.
        public static let unknownProperty = Name("org.freedesktop.DBus.Error.UnknownProperty")
        /// `DBUS_ERROR_PROPERTY_READ_ONLY`: `Properties.Set` on a read-only property.
        public static let propertyReadOnly = Name("org.freedesktop.DBus.Error.PropertyReadOnly")
        /// `DBUS_ERROR_MATCH_RULE_INVALID`: the bus rejected a match rule.
        public static let matchRuleInvalid = Name("org.freedesktop.DBus.Error.MatchRuleInvalid")
        /// `DBUS_ERROR_NOT_SUPPORTED`: e.g. unix fd passing over a transport without it.
        public static let notSupported = Name("org.freedesktop.DBus.Error.NotSupported")
    }

    /// The D-Bus error name.
    public var name: Name
    /// The human-readable message (the first string argument of an error reply).
    public var message: String

    public init(_ name: Name, _ message: String) {
        self.name = name
        self.message = message
    }

    /// `name: message`, as `dbus-send` and `busctl` print it.
    public var description: String { message.isEmpty ? name.rawValue : "\(name.rawValue): \(message)" }
}
