internal import CDBus

extension DBusConnection {
    /// Signals matching `rule`, as an `AsyncStream` of messages.
    ///
    /// The rule is added to the bus (`AddMatch`) before this returns, so a signal emitted after
    /// the call returns is delivered. When the stream ends (the consumer stops iterating, the task
    /// is cancelled, or the stream is dropped) the rule is removed (`RemoveMatch`). The stream
    /// finishes when the connection closes.
    ///
    /// Buffering: messages are yielded on the loop thread as they are dispatched, into a buffer of
    /// `bufferingPolicy` (unbounded by default; a slow consumer then grows memory, so use
    /// `.bufferingNewest(n)` when only recent signals matter).
    /// - Throws: ``DBusError`` from `AddMatch` (e.g. `MatchRuleInvalid`), or `Disconnected`.
    public func signals(
        matching rule: DBusMatchRule,
        bufferingPolicy: AsyncStream<DBusMessage>.Continuation.BufferingPolicy = .unbounded
    ) async throws -> AsyncStream<DBusMessage> {
        let (stream, continuation) = AsyncStream.makeStream(of: DBusMessage.self, bufferingPolicy: bufferingPolicy)
        try await subscribe(
            rule, deliver: { continuation.yield($0) }, finish: { continuation.finish() },
            setTermination: { handler in continuation.onTermination = { _ in handler() } })
        return stream
    }

    /// Registers a subscription, adds its rule to the bus, and arranges removal when the
    /// consumer's stream terminates.
    func subscribe(
        _ rule: DBusMatchRule, deliver: @escaping (DBusMessage) -> Void, finish: @escaping () -> Void,
        setTermination: (@escaping @Sendable () -> Void) -> Void
    ) async throws {
        try rule.validate()
        guard raw != nil else { throw DBusError(.disconnected, "the connection is closed") }
        let id = allocateID()
        subscriptions[id] = SignalSubscription(rule: rule, deliver: deliver, finish: finish)
        let loop = self.loop
        setTermination { [self] in
            loop.execute { self.assumeIsolated { $0.unsubscribe(id: id) } }
        }
        do {
            _ = try await callBus("AddMatch", [.string(rule.description)])
        } catch {
            if let subscription = subscriptions.removeValue(forKey: id) { subscription.finish() }
            throw error
        }
    }

    private func unsubscribe(id: UInt64) {
        guard let subscription = subscriptions.removeValue(forKey: id), raw != nil else { return }
        try? send(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            method: "RemoveMatch", arguments: [.string(subscription.rule.description)])
    }

    /// Hands an incoming signal to every subscription whose rule matches; decodes it at most once
    /// and only if some header matches.
    func deliverSignal(_ message: OpaquePointer) {
        guard !subscriptions.isEmpty else { return }
        let sender = dbus_message_get_sender(message).map { String(cString: $0) }
        let path = dbus_message_get_path(message).map { String(cString: $0) }
        let interface = dbus_message_get_interface(message).map { String(cString: $0) }
        let member = dbus_message_get_member(message).map { String(cString: $0) }
        var decoded: DBusMessage? = nil
        for subscription in subscriptions.values
        where subscription.rule.matchesHeader(sender: sender, path: path, interface: interface, member: member) {
            if decoded == nil {
                guard let message = try? DBusMessage(copying: message) else { return }
                decoded = message
            }
            guard let decoded else { return }
            if subscription.rule.arguments.isEmpty || subscription.rule.matchesArguments(decoded.arguments) {
                subscription.deliver(decoded)
            }
        }
    }
}
