internal import CDBus
import Synchronization

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

    /// Signals matching `rule`, handed to `handler` on the loop thread as they are dispatched, so
    /// in order with the replies to this connection's calls: a signal that arrived before a reply
    /// has been handled when the caller awaiting that reply resumes (an ``signals(matching:bufferingPolicy:)``
    /// consumer task may run later). `handler` runs on this connection's loop: an actor on the
    /// same loop can use `assumeIsolated` in it. It must not block.
    ///
    /// The rule is added to the bus before this returns; ``DBusSignalHandler/cancel()`` removes it.
    /// - Throws: ``DBusError`` from `AddMatch`, or `Disconnected`.
    ///
    /// With `onBus` false the rule is only applied here, to what the bus delivers for the rules
    /// added with ``addMatch(_:)``: one handler, in the order the signals came, while the caller
    /// chooses which of them the bus sends at all (a signal matching several bus rules is still
    /// delivered once).
    public func handleSignals(
        matching rule: DBusMatchRule, onBus: Bool = true, _ handler: @escaping @Sendable (DBusMessage) -> Void
    ) async throws -> DBusSignalHandler {
        let registration = DBusSignalHandler()
        try await subscribe(
            rule, onBus: onBus, deliver: handler, finish: {}, setTermination: { registration.setCancel($0) })
        return registration
    }

    /// Asks the bus to send this connection the signals `rule` matches (`AddMatch`), without a
    /// handler of its own: they go to the handlers whose rules match them here (a handler of
    /// ``handleSignals(matching:onBus:_:)`` with `onBus` false). Each call adds the rule once
    /// more; ``removeMatch(_:)`` removes one.
    /// - Throws: ``DBusError`` from `AddMatch` (e.g. `LimitsExceeded`), or `Disconnected`.
    public func addMatch(_ rule: DBusMatchRule) async throws {
        try rule.validate()
        guard raw != nil else { throw DBusError(.disconnected, "the connection is closed") }
        _ = try await callBus("AddMatch", [.string(rule.description)])
    }

    /// Removes a rule ``addMatch(_:)`` added (`RemoveMatch`, not awaited: the bus applies it
    /// before anything this connection sends after it).
    public func removeMatch(_ rule: DBusMatchRule) {
        guard raw != nil else { return }
        try? send(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            method: "RemoveMatch", arguments: [.string(rule.description)])
    }

    /// Registers a subscription, adds its rule to the bus, and arranges removal when the
    /// consumer's stream terminates.
    func subscribe(
        _ rule: DBusMatchRule, onBus: Bool = true, deliver: @escaping (DBusMessage) -> Void,
        finish: @escaping () -> Void, setTermination: (@escaping @Sendable () -> Void) -> Void
    ) async throws {
        try rule.validate()
        guard raw != nil else { throw DBusError(.disconnected, "the connection is closed") }
        if let name = rule.sender, rule.hasWellKnownSender { try await trackOwner(of: name) }
        let id = allocateID()
        subscriptions[id] = SignalSubscription(rule: rule, onBus: onBus, deliver: deliver, finish: finish)
        let loop = self.loop
        setTermination { [self] in
            loop.execute { self.assumeIsolated { $0.unsubscribe(id: id) } }
        }
        guard onBus else { return }
        do {
            _ = try await callBus("AddMatch", [.string(rule.description)])
        } catch {
            if let subscription = subscriptions.removeValue(forKey: id) {
                subscription.finish()
                if let name = subscription.trackedSender { untrackOwner(of: name) }
            }
            throw error
        }
    }

    /// Starts (or counts another user of) tracking the owner of a well-known sender name: an
    /// internal NameOwnerChanged subscription keeps ``senderOwners`` current.
    private func trackOwner(of name: String) async throws {
        if senderOwners[name] != nil {
            senderOwners[name]?.users += 1
            return
        }
        let id = allocateID()
        senderOwners[name] = SenderOwner(owner: nil, users: 1, subscription: id)
        let rule = DBusMatchRule(
            sender: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "NameOwnerChanged", arguments: [0: name])
        subscriptions[id] = SignalSubscription(
            rule: rule,
            deliver: { [self] message in
                guard message.arguments.count == 3, let owner = message.arguments[2].string else { return }
                self.assumeIsolated { $0.senderOwners[name]?.owner = owner.isEmpty ? nil : owner }
            },
            finish: {})
        do {
            _ = try await callBus("AddMatch", [.string(rule.description)])
            let owner = try await nameOwner(name)
            if senderOwners[name]?.subscription == id, senderOwners[name]?.owner == nil {
                senderOwners[name]?.owner = owner
            }
        } catch {
            untrackOwner(of: name)
            throw error
        }
    }

    private func untrackOwner(of name: String) {
        guard var entry = senderOwners[name] else { return }
        entry.users -= 1
        if entry.users > 0 {
            senderOwners[name] = entry
            return
        }
        senderOwners.removeValue(forKey: name)
        unsubscribe(id: entry.subscription)
    }

    private func unsubscribe(id: UInt64) {
        guard let subscription = subscriptions.removeValue(forKey: id), raw != nil else { return }
        if let name = subscription.trackedSender { untrackOwner(of: name) }
        guard subscription.onBus else { return }
        try? send(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            method: "RemoveMatch", arguments: [.string(subscription.rule.description)])
    }

    /// Hands an incoming signal to every subscription whose rule matches; decodes it at most once
    /// and only if some header matches.
    func deliverSignal(_ message: OpaquePointer) {
        guard !subscriptions.isEmpty else { return }
        let sender = dbus_message_get_sender(message).map(signalStrings.string)
        let path = dbus_message_get_path(message).map(signalStrings.string)
        let interface = dbus_message_get_interface(message).map(signalStrings.string)
        let member = dbus_message_get_member(message).map(signalStrings.string)
        var decoded: DBusMessage? = nil
        for subscription in subscriptions.values
        where subscription.matchesHeader(sender: sender, path: path, interface: interface, member: member) {
            if decoded == nil {
                guard
                    let message = try? DBusMessage(
                        copying: message, sender: sender, path: path, interface: interface, member: member,
                        strings: signalStrings)
                else { return }
                decoded = message
            }
            guard let decoded else { return }
            if let name = subscription.trackedSender, senderOwners[name]?.owner != sender { continue }
            if subscription.rule.arguments.isEmpty || subscription.rule.matchesArguments(decoded.arguments) {
                subscription.deliver(decoded)
            }
        }
    }
}

/// A registration made by ``DBusConnection/handleSignals(matching:_:)``.
public final class DBusSignalHandler: Sendable {
    private let onCancel = Mutex<(@Sendable () -> Void)?>(nil)

    init() {}

    func setCancel(_ body: @escaping @Sendable () -> Void) { onCancel.withLock { $0 = body } }

    /// Stops handing signals to the handler and removes the rule from the bus. Safe to call twice.
    public func cancel() {
        let body = onCancel.withLock { current -> (@Sendable () -> Void)? in
            defer { current = nil }
            return current
        }
        body?()
    }
}
