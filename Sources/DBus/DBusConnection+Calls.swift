internal import CDBus
import EventLoop

extension DBusConnection {
    /// Calls a method and waits for its reply (`dbus_connection_send_with_reply` plus a
    /// pending-call notify; the loop keeps running while waiting).
    ///
    /// - Parameters:
    ///   - destination: the bus name to call (`org.bluez`, `:1.7`); nil on a peer-to-peer connection.
    ///   - expecting: when given, the reply's signature must match, else ``DBusError`` `InvalidSignature`.
    ///   - timeout: nil waits forever; the default is libdbus's 25 s.
    /// - Returns: the reply's arguments.
    /// - Throws: ``DBusError`` with the peer's error name and message (e.g.
    ///   `org.bluez.Error.Failed: le-connection-abort-by-local`); `org.freedesktop.DBus.Error.NoReply`
    ///   when the timeout passes; `Disconnected` when the connection closes first;
    ///   `CancellationError` when the calling task is cancelled (the pending call is cancelled and
    ///   a late reply is dropped).
    public func call(
        destination: String?, path: DBusObjectPath, interface: String?, method: String,
        arguments: [DBusValue] = [], expecting: DBusSignature? = nil, timeout: Duration? = .seconds(25)
    ) async throws -> [DBusValue] {
        try Task.checkCancellation()
        let message = try makeMethodCall(destination: destination, path: path, interface: interface, method: method)
        defer { dbus_message_unref(message) }
        try MessageEncoder.append(arguments, to: message)
        let milliseconds: Int32
        if let timeout {
            let (seconds, attoseconds) = timeout.components
            let ms = max(0, seconds) * 1000 + attoseconds / 1_000_000_000_000_000
            milliseconds = Int32(clamping: ms)
        } else {
            milliseconds = Int32.max  // DBUS_TIMEOUT_INFINITE
        }
        let id = allocateID()
        let values: [DBusValue]
        do {
            // The loop as the task's executor preference while it waits: a continuation resumes
            // through the "generic" executor, which is then this loop, not Swift's global pool —
            // the caller is queued on the loop as the reply is dispatched, ahead of the messages
            // after the reply (see `dispatchQueued()`), however busy the pool is.
            values = try await withTaskExecutorPreference(loop.taskExecutor) {
                try await withTaskCancellationHandler {
                    try await withCheckedThrowingContinuation { continuation in
                        startCall(id: id, message: message, timeout: milliseconds, continuation: continuation)
                    }
                } onCancel: {
                    loop.execute { [self] in self.assumeIsolated { $0.cancelCall(id: id) } }
                }
            }
            callerResumed(id)
        } catch {
            callerResumed(id)
            throw error
        }
        if let expecting {
            let actual = DBusSignature(types: values.map(\.type))
            guard actual == expecting else {
                throw DBusError(
                    .invalidSignature,
                    "\(interface ?? "").\(method) replied with signature \"\(actual)\", expected \"\(expecting)\"")
            }
        }
        return values
    }

    /// Sends a method call without waiting for (or wanting) a reply: the message carries
    /// `NO_REPLY_EXPECTED` (`dbus_message_set_no_reply`), so the peer sends none.
    ///
    /// Buffering: the message is queued in libdbus and written as soon as the socket allows;
    /// this returns before it is written.
    public func send(
        destination: String?, path: DBusObjectPath, interface: String?, method: String,
        arguments: [DBusValue] = []
    ) throws {
        let message = try makeMethodCall(destination: destination, path: path, interface: interface, method: method)
        defer { dbus_message_unref(message) }
        dbus_message_set_no_reply(message, 1)
        try MessageEncoder.append(arguments, to: message)
        try sendMessage(message)
    }

    /// Emits a signal (`dbus_message_new_signal`), broadcast unless `destination` is given.
    ///
    /// Buffering: queued in libdbus and written as soon as the socket allows; ordering with other
    /// messages sent from this connection is preserved.
    public func emit(
        path: DBusObjectPath, interface: String, member: String, arguments: [DBusValue] = [],
        destination: String? = nil
    ) throws {
        try LibDBus.validate(interface, as: .interface)
        try LibDBus.validate(member, as: .member)
        let message = try LibDBus.check(
            path.rawValue.withCString { p in
                interface.withCString { i in member.withCString { m in dbus_message_new_signal(p, i, m) } }
            }, "dbus_message_new_signal")
        defer { dbus_message_unref(message) }
        if let destination {
            try LibDBus.validate(destination, as: .busName)
            try LibDBus.check(
                destination.withCString { dbus_message_set_destination(message, $0) }, "dbus_message_set_destination")
        }
        try MessageEncoder.append(arguments, to: message)
        try sendMessage(message)
    }

    /// Bytes queued in libdbus and not yet written to the socket (`dbus_connection_get_outgoing_size`);
    /// a producer of many signals can wait while this is large, for back-pressure.
    public var outgoingQueueSize: Int {
        guard let raw else { return 0 }
        return dbus_connection_get_outgoing_size(raw)
    }

    /// Waits until every queued outgoing message is written to the socket
    /// (`dbus_connection_has_messages_to_send`), checking every millisecond; never blocks the loop,
    /// unlike `dbus_connection_flush`. Returns at once when the connection is closed.
    public func flush() async throws {
        while let raw, dbus_connection_has_messages_to_send(raw) != 0 {
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    func sendMessage(_ message: OpaquePointer) throws {
        guard let raw else { throw DBusError(.disconnected, "the connection is closed") }
        try LibDBus.check(dbus_connection_send(raw, message, nil), "dbus_connection_send")
    }

    func makeMethodCall(
        destination: String?, path: DBusObjectPath, interface: String?, method: String
    ) throws -> OpaquePointer {
        if let destination { try LibDBus.validate(destination, as: .busName) }
        if let interface { try LibDBus.validate(interface, as: .interface) }
        try LibDBus.validate(method, as: .member)
        let message = withOptionalCString(destination) { d in
            withOptionalCString(interface) { i in
                path.rawValue.withCString { p in
                    method.withCString { m in dbus_message_new_method_call(d, p, i, m) }
                }
            }
        }
        return try LibDBus.check(message, "dbus_message_new_method_call")
    }

    private func startCall(
        id: UInt64, message: OpaquePointer, timeout: Int32,
        continuation: CheckedContinuation<[DBusValue], any Error>
    ) {
        guard let raw else {
            continuation.resume(throwing: DBusError(.disconnected, "the connection is closed"))
            return
        }
        var pending: OpaquePointer? = nil
        guard dbus_connection_send_with_reply(raw, message, &pending, timeout) != 0 else {
            continuation.resume(throwing: DBusError(.noMemory, "dbus_connection_send_with_reply failed: out of memory"))
            return
        }
        guard let pending else {
            continuation.resume(throwing: DBusError(.disconnected, "the connection is disconnected"))
            return
        }
        pendingCalls[id] = PendingCall(pending: pending, continuation: continuation)
        pendingByPointer[pending] = id
        if pendingCalls.count == 1, inputCoalescing > 0 { applyInputCoalescing() }
        let attached = dbus_pending_call_set_notify(
            pending,
            { pending, data in DBusConnection.hook(pending, data, otherwise: ()) { $0.completeCall($1) } },
            Unmanaged.passRetained(self).toOpaque(),
            { data in if let data { Unmanaged<DBusConnection>.fromOpaque(data).release() } })
        if attached == 0 {
            finishCall(
                id: id, with: .failure(DBusError(.noMemory, "dbus_pending_call_set_notify failed")), cancel: true)
        } else if dbus_pending_call_get_completed(pending) != 0 {
            completeCall(pending)
        }
    }

    private func completeCall(_ pending: OpaquePointer) {
        guard let id = pendingByPointer[pending] else { return }
        let result: Result<[DBusValue], any Error>
        if let reply = dbus_pending_call_steal_reply(pending) {
            result = Result { try Self.values(ofReply: reply) }
            dbus_message_unref(reply)
        } else {
            result = .failure(DBusError(.noReply, "the call completed without a reply"))
        }
        finishCall(id: id, with: result, cancel: false)
    }

    private func cancelCall(id: UInt64) {
        finishCall(id: id, with: .failure(CancellationError()), cancel: true)
    }

    private func finishCall(id: UInt64, with result: Result<[DBusValue], any Error>, cancel: Bool) {
        guard let call = pendingCalls.removeValue(forKey: id) else { return }
        pendingByPointer.removeValue(forKey: call.pending)
        if pendingCalls.isEmpty, inputCoalescing > 0 { applyInputCoalescing() }
        if unresumedCalls.isEmpty { heldUntil = EventLoop.now() + Self.replyHold }
        unresumedCalls.insert(id)
        if cancel { dbus_pending_call_cancel(call.pending) }
        dbus_pending_call_unref(call.pending)
        call.continuation.resume(with: result)
    }

    /// The arguments of a method return, or the error an error reply carries.
    static func values(ofReply reply: OpaquePointer) throws -> [DBusValue] {
        if dbus_message_get_type(reply) == DBUS_MESSAGE_TYPE_ERROR {
            let name = dbus_message_get_error_name(reply).map { String(cString: $0) } ?? DBusError.Name.failed.rawValue
            throw DBusError(DBusError.Name(name), MessageDecoder.firstString(of: reply) ?? "")
        }
        return try MessageDecoder.values(of: reply)
    }

    /// Calls a method of the bus itself (`org.freedesktop.DBus` at `/org/freedesktop/DBus`).
    func callBus(_ method: String, _ arguments: [DBusValue] = []) async throws -> [DBusValue] {
        try await call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            method: method, arguments: arguments)
    }
}

func withOptionalCString<R>(_ string: String?, _ body: (UnsafePointer<CChar>?) throws -> R) rethrows -> R {
    guard let string else { return try body(nil) }
    return try string.withCString { try body($0) }
}
