/// One signal stream of a connection: its rule and where matching messages go.
/// Lives in the connection's isolated state; `deliver` and `finish` run on the loop thread.
///
/// A class, not a struct: ``DBusConnection/deliverSignal(_:)`` walks every subscription for every
/// signal, and copying a struct out of the dictionary copied the rule (six optional strings and a
/// dictionary) and both closures, a dozen retains and releases per subscription per signal.
final class SignalSubscription {
    let rule: DBusMatchRule
    /// The rule's sender when it is a well-known name whose owner the connection tracks
    /// (``DBusMatchRule/hasWellKnownSender``), worked out once here rather than per signal.
    let trackedSender: String?
    /// Whether the rule was added to the bus (else it only filters what other rules bring).
    let onBus: Bool
    /// Hands a matching message to the stream (e.g. `AsyncStream.Continuation.yield`).
    let deliver: (DBusMessage) -> Void
    /// Ends the stream (connection closed).
    let finish: () -> Void

    init(
        rule: DBusMatchRule, onBus: Bool = true, deliver: @escaping (DBusMessage) -> Void,
        finish: @escaping () -> Void
    ) {
        self.rule = rule
        self.onBus = onBus
        self.trackedSender = rule.hasWellKnownSender ? rule.sender : nil
        self.deliver = deliver
        self.finish = finish
    }

    /// Whether the header fields match the rule (arguments are checked by
    /// ``DBusMatchRule/matchesArguments(_:)``; a tracked sender against its current owner).
    func matchesHeader(sender: String?, path: String?, interface: String?, member: String?) -> Bool {
        if let want = rule.sender, trackedSender == nil, want != sender { return false }
        if let want = rule.path, want.rawValue != path { return false }
        if let want = rule.pathNamespace {
            guard let path, DBusObjectPath(unchecked: path).isDescendant(of: want) else { return false }
        }
        if let want = rule.interface, want != interface { return false }
        if let want = rule.member, want != member { return false }
        return true
    }
}
