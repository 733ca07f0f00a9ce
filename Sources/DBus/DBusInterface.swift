/// An interface to export on an object path: methods, properties and (for introspection) signals.
public struct DBusInterface: Sendable {
    /// A signal the interface emits, for the introspection XML.
    public struct Signal: Sendable {
        public var name: String
        public var signature: DBusSignature
        public var argumentNames: [String]
        public init(_ name: String, signature: DBusSignature = .empty, argumentNames: [String] = []) {
            self.name = name
            self.signature = signature
            self.argumentNames = argumentNames
        }
    }

    public var name: String
    public var methods: [DBusMethod]
    public var properties: [DBusProperty]
    public var signals: [Signal]

    public init(
        _ name: String, methods: [DBusMethod] = [], properties: [DBusProperty] = [], signals: [Signal] = []
    ) {
        self.name = name
        self.methods = methods
        self.properties = properties
        self.signals = signals
    }
}
