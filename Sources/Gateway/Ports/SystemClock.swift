import EventLoop
import JSON
import LocalSystem

/// The real clock: `ContinuousClock` for monotonic time, `WallClock` (CLOCK_REALTIME) for wall
/// time, the event loop's timers for ``schedule(at:on:_:)``.
public struct SystemClock: GatewayClock {
    private let origin = ContinuousClock.now

    public init() {}

    public func now() -> Double {
        let elapsed = ContinuousClock.now - origin
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
    }

    public func wallMilliseconds() -> Int64 {
        WallClock.milliseconds()
    }

    public func utcOffsetSeconds(atWallMilliseconds wallMilliseconds: Int64) -> Int {
        WallClock.utcOffsetSeconds(at: wallMilliseconds / 1000)
    }

    public func sleep(until deadline: Double) async throws {
        let delay = deadline - now()
        if delay > 0 { try await Task.sleep(for: .nanoseconds(Int64(saturating: delay * 1e9))) }
    }

    public func schedule(at deadline: Double, on loop: EventLoop, _ fire: @escaping @Sendable () -> Void) -> ClockTimer
    {
        let token = loop.addTimer(after: deadline - now(), handler: fire)
        return ClockTimer { loop.cancelTimer(token) }
    }
}
