import Synchronization

/// A wait that a test opens by hand: tasks that reach ``wait()`` while it is closed suspend
/// until ``open()`` (or their cancellation) — no polling, so a loop with such a task settles.
public final class Gate: Sendable {
    private struct State {
        var open: Bool
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextID: UInt64 = 0
    }

    private let state: Mutex<State>

    public init(open: Bool = true) { state = Mutex(State(open: open)) }

    public var isOpen: Bool { state.withLock { $0.open } }
    /// Tasks waiting now.
    public var waiting: Int { state.withLock { $0.waiters.count } }

    public func close() { state.withLock { $0.open = false } }

    public func open() {
        let waiters = state.withLock { state in
            state.open = true
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns when the gate is open or the task is cancelled.
    public func wait() async {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow: Bool = state.withLock { state in
                    if state.open || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }
}
