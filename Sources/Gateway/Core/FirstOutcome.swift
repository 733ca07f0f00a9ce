import Synchronization

/// A wait that the first of several sources ends: a port's completion, a cancellation. Later
/// outcomes are ignored, and an outcome that comes before the wait began ends it at once.
final class FirstOutcome<Value: Sendable>: Sendable {
    private let state = Mutex<(continuation: CheckedContinuation<Value, Never>?, outcome: Value?)>((nil, nil))

    /// Waits with `continuation` (resumed at once when an outcome is already there).
    func wait(_ continuation: CheckedContinuation<Value, Never>) {
        let ready: Value? = state.withLock { state in
            guard let outcome = state.outcome else {
                state.continuation = continuation
                return nil
            }
            return outcome
        }
        if let ready { continuation.resume(returning: ready) }
    }

    /// The outcome, if it is the first.
    func resolve(_ value: Value) {
        let waiting: CheckedContinuation<Value, Never>? = state.withLock { state in
            guard state.outcome == nil else { return nil }
            state.outcome = value
            defer { state.continuation = nil }
            return state.continuation
        }
        waiting?.resume(returning: value)
    }
}
