/// A method of an exported interface: its name, argument signatures and handler.
///
/// The connection checks the call's arguments against ``inputSignature`` before the handler runs
/// (a mismatch is answered with `org.freedesktop.DBus.Error.InvalidArgs`) and the handler's
/// result against ``outputSignature`` before replying. A handler throws ``DBusError`` to send
/// that error reply; any other error becomes `org.freedesktop.DBus.Error.Failed` with its text.
public struct DBusMethod: Sendable {
    /// How the handler runs and replies.
    public enum Handler: Sendable {
        /// Runs synchronously on the loop thread during dispatch; must not block. The reply is
        /// sent as soon as it returns. The cheapest kind: no task, no hop.
        case immediate(@Sendable (DBusMessage) throws -> [DBusValue])
        /// Runs in a new `Task`; the reply is sent when it returns, however much later
        /// (e.g. after `Task.sleep` to model a slow `Connect`).
        case async(@Sendable (DBusMessage) async throws -> [DBusValue])
        /// Runs synchronously on the loop thread with a ``DBusPendingReply`` that may be completed
        /// later from any thread or task (e.g. when a simulated device finishes connecting).
        case deferred(@Sendable (DBusMessage, DBusPendingReply) -> Void)
    }

    public var name: String
    /// The arguments the method takes; nil accepts any (the handler checks them itself).
    public var inputSignature: DBusSignature?
    /// The reply's arguments; nil lets the handler return any.
    public var outputSignature: DBusSignature?
    /// Argument names for introspection (optional; missing names are left out of the XML).
    public var inputNames: [String]
    public var outputNames: [String]
    public var handler: Handler

    public init(
        _ name: String, in inputSignature: DBusSignature? = .empty, out outputSignature: DBusSignature? = .empty,
        inputNames: [String] = [], outputNames: [String] = [], handler: Handler
    ) {
        self.name = name
        self.inputSignature = inputSignature
        self.outputSignature = outputSignature
        self.inputNames = inputNames
        self.outputNames = outputNames
        self.handler = handler
    }

    /// A method whose `async` handler runs in its own task (see ``Handler/async(_:)``).
    public init(
        _ name: String, in inputSignature: DBusSignature? = .empty, out outputSignature: DBusSignature? = .empty,
        _ body: @escaping @Sendable (DBusMessage) async throws -> [DBusValue]
    ) {
        self.init(name, in: inputSignature, out: outputSignature, handler: .async(body))
    }

    /// A method answered synchronously on the loop thread (see ``Handler/immediate(_:)``).
    public static func immediate(
        _ name: String, in inputSignature: DBusSignature? = .empty, out outputSignature: DBusSignature? = .empty,
        _ body: @escaping @Sendable (DBusMessage) throws -> [DBusValue]
    ) -> DBusMethod {
        DBusMethod(name, in: inputSignature, out: outputSignature, handler: .immediate(body))
    }

    /// A method answered later through a ``DBusPendingReply`` (see ``Handler/deferred(_:)``).
    public static func deferred(
        _ name: String, in inputSignature: DBusSignature? = .empty, out outputSignature: DBusSignature? = .empty,
        _ body: @escaping @Sendable (DBusMessage, DBusPendingReply) -> Void
    ) -> DBusMethod {
        DBusMethod(name, in: inputSignature, out: outputSignature, handler: .deferred(body))
    }
}
