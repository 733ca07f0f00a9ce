import Synchronization

/// A value set once and waited for by any number of tasks, with no task of its own: the
/// termination signal, a request to end. A wait ends with the value, or with nil when the waiting
/// task is cancelled first; a value set before a wait ends it at once.
public final class OneShot<Value: Sendable>: Sendable {
    private struct State {
        public var value: Value?
        var waiters: [Int: CheckedContinuation<Value?, Never>] = [:]
        var nextID = 0
    }
    private let state = Mutex(State())

    public init() {}

    /// Sets the value when it is the first (later ones are ignored); every wait ends with it.
    public func set(_ value: Value) {
        let waiters = state.withLock { state -> [CheckedContinuation<Value?, Never>] in
            guard state.value == nil else { return [] }
            state.value = value
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: value) }
    }

    /// The value, nil until set.
    public var value: Value? { state.withLock { $0.value } }

    /// Waits for the value; nil when the calling task is cancelled first.
    public func wait() async -> Value? {
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ready: Value?? = state.withLock { state in
                    if let value = state.value { return .some(value) }
                    // Cancelled before the wait was registered: the handler below found nothing.
                    if Task.isCancelled { return .some(nil) }
                    state.waiters[id] = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume(returning: nil)
        }
    }
}
