import EventLoop
import JSON
import Synchronization

/// A clock that moves only when told to: ``advance(by:)`` sets the time and resumes every
/// sleeper whose deadline has passed and fires every due timer (on its loop), in deadline order.
/// For deterministic tests of timeouts, rate control and availability.
public final class ManualClock: GatewayClock {
    private struct Sleeper {
        var id: UInt64
        var deadline: Double
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct Timer {
        var id: UInt64
        var deadline: Double
        var loop: EventLoop
        var fire: @Sendable () -> Void
    }

    private struct State {
        var now: Double
        var wallOrigin: Int64
        var utcOffset = 0
        var nextID: UInt64 = 0
        var sleepers: [Sleeper] = []
        var timers: [Timer] = []
    }

    private let state: Mutex<State>

    /// Starts at monotonic time `start` and wall time `wallMilliseconds` (default
    /// 2026-11-30T17:00:00.000Z).
    public init(start: Double = 0, wallMilliseconds: Int64 = 1_796_058_000_000) {
        state = Mutex(State(now: start, wallOrigin: wallMilliseconds - Int64(saturating: start * 1000)))
    }

    public func now() -> Double { state.withLock { $0.now } }

    public func wallMilliseconds() -> Int64 {
        state.withLock { $0.wallOrigin + Int64(saturating: ($0.now * 1000).rounded()) }
    }

    public func utcOffsetSeconds(atWallMilliseconds wallMilliseconds: Int64) -> Int {
        state.withLock { $0.utcOffset }
    }

    /// Sets the local time zone offset the clock reports (seconds east of UTC; 0 at first).
    public func setUTCOffset(seconds: Int) { state.withLock { $0.utcOffset = seconds } }

    /// Number of tasks sleeping on this clock (tests wait for a timer to be armed).
    public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    /// Number of timers armed on this clock and not fired or cancelled.
    public var timerCount: Int { state.withLock { $0.timers.count } }

    /// Moves time forward, resumes the sleepers that are due and queues the due timers to their
    /// loops (a test settles the loop to see what they did).
    public func advance(by seconds: Double) {
        let (due, timers): ([Sleeper], [Timer]) = state.withLock { state in
            state.now += max(0, seconds)
            let now = state.now
            let due = state.sleepers.filter { $0.deadline <= now }.sorted { $0.deadline < $1.deadline }
            state.sleepers.removeAll { $0.deadline <= now }
            let timers = state.timers.filter { $0.deadline <= now }.sorted { $0.deadline < $1.deadline }
            state.timers.removeAll { $0.deadline <= now }
            return (due, timers)
        }
        for sleeper in due { sleeper.continuation.resume() }
        for timer in timers { timer.loop.execute(timer.fire) }
    }

    public func schedule(at deadline: Double, on loop: EventLoop, _ fire: @escaping @Sendable () -> Void) -> ClockTimer
    {
        let id: UInt64? = state.withLock { state in
            guard deadline > state.now else { return nil }
            state.nextID += 1
            state.timers.append(Timer(id: state.nextID, deadline: deadline, loop: loop, fire: fire))
            return state.nextID
        }
        guard let id else {
            loop.execute(fire)
            return ClockTimer {}
        }
        return ClockTimer { [self] in state.withLock { $0.timers.removeAll { $0.id == id } } }
    }

    public func sleep(until deadline: Double) async throws {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resumeNow: Bool = state.withLock { state in
                    if state.now >= deadline || Task.isCancelled { return true }
                    state.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let cancelled = state.withLock { state -> Sleeper? in
                guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
                return state.sleepers.remove(at: index)
            }
            cancelled?.continuation.resume(throwing: CancellationError())
        }
        try Task.checkCancellation()
    }
}
