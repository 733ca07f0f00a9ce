import EventLoop

/// Time as the gateway sees it: a monotonic clock for intervals, timeouts and timers, and the
/// wall clock for `last_seen`. Injected so tests advance time by hand (``ManualClock``).
public protocol GatewayClock: Sendable {
    /// Monotonic seconds since an arbitrary origin.
    func now() -> Double
    /// Milliseconds since 1970-01-01T00:00:00Z.
    func wallMilliseconds() -> Int64
    /// The gateway's local time zone offset from UTC in seconds (east positive) at the wall time
    /// `wallMilliseconds` (for clocks that show local time, e.g. a command's `tz_offset`).
    func utcOffsetSeconds(atWallMilliseconds wallMilliseconds: Int64) -> Int
    /// Suspends until ``now()`` ≥ `deadline`; throws `CancellationError` when the task is cancelled.
    func sleep(until deadline: Double) async throws
    /// Calls `fire` once on `loop`'s thread when ``now()`` reaches `deadline`, unless the returned
    /// timer is cancelled first. Called on the loop thread.
    func schedule(at deadline: Double, on loop: EventLoop, _ fire: @escaping @Sendable () -> Void) -> ClockTimer
}

/// A timer from ``GatewayClock/schedule(at:on:_:)``.
public struct ClockTimer: Sendable {
    private let end: @Sendable () -> Void

    /// - Parameter cancel: stops the timer; called at most once, on the loop thread.
    public init(cancel: @escaping @Sendable () -> Void) { end = cancel }

    /// Stops the timer if it has not fired.
    public func cancel() { end() }
}
