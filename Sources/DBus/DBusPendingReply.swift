import Synchronization

/// The reply owed to one method call, to be completed once, later, from any thread or task.
///
/// Completing hops to the connection's loop (`EventLoop.execute`) and sends a method return or an
/// error reply. Completing twice is ignored. If the last reference goes away without a reply, the
/// caller gets `org.freedesktop.DBus.Error.Failed` "method handler did not reply" instead of
/// waiting for its timeout. If the caller asked for no reply, nothing is sent.
///
/// Invariant behind `Sendable`: the stored properties are immutable or guarded by a `Mutex`.
public final class DBusPendingReply: Sendable {
    /// The call being answered.
    public let call: DBusMessage
    private let connection: DBusConnection
    private let outputSignature: DBusSignature?
    private let done = Mutex(false)

    init(call: DBusMessage, connection: DBusConnection, outputSignature: DBusSignature?) {
        self.call = call
        self.connection = connection
        self.outputSignature = outputSignature
    }

    deinit {
        if !done.withLock({ $0 }) {
            complete(.failure(DBusError(.failed, "method handler did not reply")))
        }
    }

    /// Sends a method return with `values` (checked against the method's output signature).
    public func succeed(_ values: [DBusValue] = []) {
        complete(.success(values))
    }

    /// Sends an error reply, e.g. `fail(DBusError("org.bluez.Error.Failed", "le-connection-abort-by-local"))`.
    public func fail(_ error: DBusError) {
        complete(.failure(error))
    }

    private func complete(_ result: Result<[DBusValue], DBusError>) {
        let first = done.withLock { done in
            defer { done = true }
            return !done
        }
        guard first else { return }
        let connection = self.connection
        let call = self.call
        let signature = outputSignature
        connection.loop.execute {
            connection.assumeIsolated { $0.sendReply(to: call, result: result, outputSignature: signature) }
        }
    }
}
