/// A change of the client's connection, as reported by ``MQTTClient/connectionStates()``.
public enum MQTTConnectionState: Sendable, Hashable {
    /// A connection attempt started (1 for the first attempt after a success or ever).
    case connecting(attempt: Int)
    /// The broker accepted the connection. `sessionPresent`: it kept our session (subscriptions
    /// and queued messages), so the client did not need to re-subscribe.
    case connected(sessionPresent: Bool)
    /// The connection ended or an attempt failed. `error` is nil after ``MQTTClient/disconnect()``;
    /// `reconnectIn` is the delay before the next attempt in seconds, nil when none is planned.
    case disconnected(error: MQTTError?, reconnectIn: Double?)
}
