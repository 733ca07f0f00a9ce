/// One signal stream of a connection: its rule and where matching messages go.
/// Lives in the connection's isolated state; `deliver` and `finish` run on the loop thread.
struct SignalSubscription {
    var rule: DBusMatchRule
    /// Hands a matching message to the stream (e.g. `AsyncStream.Continuation.yield`).
    var deliver: (DBusMessage) -> Void
    /// Ends the stream (connection closed).
    var finish: () -> Void
}
