internal import CDBus

/// A received D-Bus message (a signal, or a method call to an exported object), copied out of
/// libdbus: header fields and decoded arguments. A plain `Sendable` value.
public struct DBusMessage: Sendable, CustomStringConvertible {
    /// `DBUS_MESSAGE_TYPE_*`.
    public enum Kind: Sendable, Hashable {
        case methodCall, methodReturn, error, signal
    }

    public var kind: Kind
    /// The sender's unique name (e.g. `:1.42`); nil on a peer-to-peer connection.
    public var sender: String?
    /// The destination name, when the message had one.
    public var destination: String?
    /// The object path (signals and method calls).
    public var path: DBusObjectPath?
    /// The interface (signals always; method calls usually).
    public var interface: String?
    /// The member: the signal or method name.
    public var member: String?
    /// The error name (error replies only).
    public var errorName: String?
    /// The message serial assigned by the sender.
    public var serial: UInt32
    /// The decoded arguments.
    public var arguments: [DBusValue]
    /// True when the sender asked for no reply (`NO_REPLY_EXPECTED`, `dbus_message_get_no_reply`).
    public var noReplyExpected: Bool

    /// The body's signature, from the arguments' types.
    public var signature: DBusSignature { DBusSignature(types: arguments.map(\.type)) }

    public init(
        kind: Kind, sender: String? = nil, destination: String? = nil, path: DBusObjectPath? = nil,
        interface: String? = nil, member: String? = nil, errorName: String? = nil, serial: UInt32 = 0,
        arguments: [DBusValue] = [], noReplyExpected: Bool = false
    ) {
        self.kind = kind
        self.sender = sender
        self.destination = destination
        self.path = path
        self.interface = interface
        self.member = member
        self.errorName = errorName
        self.serial = serial
        self.arguments = arguments
        self.noReplyExpected = noReplyExpected
    }

    /// Copies header fields out of a libdbus `DBusMessage*` and decodes its body.
    init(copying message: OpaquePointer) throws {
        try self.init(
            copying: message, sender: dbus_message_get_sender(message).map { String(cString: $0) },
            path: dbus_message_get_path(message).map { String(cString: $0) },
            interface: dbus_message_get_interface(message).map { String(cString: $0) },
            member: dbus_message_get_member(message).map { String(cString: $0) })
    }

    /// As ``init(copying:)``, with the header fields a caller already read (a signal's, to match
    /// rules): each is copied out of libdbus once per message, not twice. Long strings of the
    /// body come from `strings` when given.
    init(
        copying message: OpaquePointer, sender: String?, path: String?, interface: String?, member: String?,
        strings: StringCache? = nil
    ) throws {
        switch dbus_message_get_type(message) {
        case DBUS_MESSAGE_TYPE_METHOD_CALL: kind = .methodCall
        case DBUS_MESSAGE_TYPE_METHOD_RETURN: kind = .methodReturn
        case DBUS_MESSAGE_TYPE_ERROR: kind = .error
        default: kind = .signal
        }
        self.sender = sender
        destination = dbus_message_get_destination(message).map { String(cString: $0) }
        self.path = path.map { DBusObjectPath(unchecked: $0) }
        self.interface = interface
        self.member = member
        errorName = dbus_message_get_error_name(message).map { String(cString: $0) }
        serial = dbus_message_get_serial(message)
        arguments = try MessageDecoder.values(of: message, strings: strings)
        noReplyExpected = dbus_message_get_no_reply(message) != 0
    }

    public var description: String {
        var out = "\(kind)"
        if let sender { out += " sender=\(sender)" }
        if let path { out += " path=\(path)" }
        if let interface { out += " interface=\(interface)" }
        if let member { out += " member=\(member)" }
        if let errorName { out += " error=\(errorName)" }
        out += " (" + arguments.map(\.description).joined(separator: ", ") + ")"
        return out
    }
}
