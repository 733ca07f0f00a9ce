/// Time as the gateway sees it: a monotonic clock for intervals, timeouts and timers, and the
/// wall clock for `last_seen`. Injected so tests advance time by hand (``ManualClock``).
public protocol GatewayClock: Sendable {
    /// Monotonic seconds since an arbitrary origin.
    func now() -> Double
    /// Milliseconds since 1970-01-01T00:00:00Z.
    func wallMilliseconds() -> Int64
    /// Suspends until ``now()`` ≥ `deadline`; throws `CancellationError` when the task is cancelled.
    func sleep(until deadline: Double) async throws
}
