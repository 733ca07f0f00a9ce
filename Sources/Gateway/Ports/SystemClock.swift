import JSON
import LocalSystem

/// The real clock: `ContinuousClock` for monotonic time, `WallClock` (CLOCK_REALTIME) for wall time.
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

    public func sleep(until deadline: Double) async throws {
        let delay = deadline - now()
        if delay > 0 { try await Task.sleep(for: .nanoseconds(Int64(saturating: delay * 1e9))) }
    }
}
