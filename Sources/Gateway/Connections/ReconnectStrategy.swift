/// When to connect again after a failed attempt or a dropped link — the central's reconnect
/// rule (docs/architecture.md), kept per device by the gateway and evaluated on the gateway's clock.
///
/// `Retry.ReconnectPolicy` conforms (the default); tests use a fixed delay.
public protocol ReconnectStrategy: Sendable {
    /// The device connected at `now` (monotonic seconds).
    mutating func connected(at now: Double)
    /// An attempt failed or the link dropped at `now`: the delay in seconds before the next
    /// attempt, or nil to give up (e.g. `operationNotSupported`).
    mutating func failed(_ error: BLEPortError, at now: Double) -> Double?
    /// Forget the history (the user asked to connect now).
    mutating func reset()
}
