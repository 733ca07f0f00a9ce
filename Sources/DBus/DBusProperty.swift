/// A property of an exported interface, served through `org.freedesktop.DBus.Properties`.
///
/// The connection stores the current value (``value``; nil means the property does not exist
/// right now and is left out of `GetAll`, `GetManagedObjects` and `InterfacesAdded`, as BlueZ
/// does with optional properties). Change it with ``DBusConnection/setProperties(_:interface:at:emit:)``.
public struct DBusProperty: Sendable {
    /// Who may read and write the property (the introspection `access` attribute).
    public enum Access: String, Sendable {
        case read, write, readwrite
    }

    public var name: String
    public var type: DBusType
    public var access: Access
    /// The initial value (not a variant unless ``type`` is `v`); nil when absent.
    public var value: DBusValue?
    /// Called on the loop thread when a client's `Set` passed the name, access and type checks,
    /// before the value is stored and `PropertiesChanged` is emitted. Throw ``DBusError`` to refuse
    /// (e.g. `org.bluez.Error.NotReady`); the error goes back to the client and nothing changes.
    public var onSet: (@Sendable (_ newValue: DBusValue, _ call: DBusMessage) throws -> Void)?

    public init(
        _ name: String, type: DBusType, access: Access = .read, value: DBusValue? = nil,
        onSet: (@Sendable (_ newValue: DBusValue, _ call: DBusMessage) throws -> Void)? = nil
    ) {
        self.name = name
        self.type = type
        self.access = access
        self.value = value
        self.onSet = onSet
    }
}
