import EventLoop

/// A task waiting inside ``CentralManager`` for a condition on BlueZ's objects (e.g.
/// `ServicesResolved` or `Connected=false`), re-checked after every signal. Actor-confined.
struct Waiter {
    /// Checks the condition; when it holds, resumes the waiting task and returns true.
    let evaluate: (isolated CentralManager) -> Bool
    /// Resumes the waiting task with an error (timeout, cancellation, close).
    let fail: (CentralError) -> Void
    var timer: EventLoop.Token?
}

extension CentralManager {
    /// Waits until `check` returns a result (checked now and after every change of BlueZ's
    /// objects or of the state), failing with ``CentralError/Code/connectionTimeout`` after
    /// `timeout` (nil: no limit) or ``CentralError/Code/cancelled`` when the task is cancelled.
    func waitUntil<T: Sendable>(
        timeout: Duration?, operation: String, timeoutCode: CentralError.Code = .connectionTimeout,
        _ check: @escaping @Sendable (isolated CentralManager) -> Result<T, CentralError>?
    ) async throws -> T {
        if let result = check(self) { return try result.get() }
        if closed { throw closedError(operation) }
        let id = makeID()
        let loop = self.loop
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                var waiter = Waiter(
                    evaluate: { central in
                        guard let result = check(central) else { return false }
                        continuation.resume(with: result.mapError { $0 as any Error })
                        return true
                    },
                    fail: { continuation.resume(throwing: $0) })
                if let timeout {
                    waiter.timer = loop.addTimer(after: timeout.seconds) { [weak self] in
                        self?.assumeIsolated { central in
                            central.finishWaiter(
                                id,
                                CentralError(
                                    timeoutCode, operation: operation, message: "no result within \(timeout.seconds) s")
                            )
                        }
                    }
                }
                waiters[id] = waiter
            }
        } onCancel: { [self] in
            loop.execute {
                self.assumeIsolated { central in
                    central.finishWaiter(id, CentralError(.cancelled, operation: operation, message: "cancelled"))
                }
            }
        }
    }

    func finishWaiter(_ id: Int, _ error: CentralError) {
        guard let waiter = waiters.removeValue(forKey: id) else { return }
        if let timer = waiter.timer { loop.cancelTimer(timer) }
        waiter.fail(error)
    }

    func evaluateWaiters() {
        guard !waiters.isEmpty else { return }
        for (id, waiter) in waiters where waiter.evaluate(self) {
            waiters.removeValue(forKey: id)
            if let timer = waiter.timer { loop.cancelTimer(timer) }
        }
    }

    func failAllWaiters(_ error: CentralError) {
        for id in Array(waiters.keys) { finishWaiter(id, error) }
    }
}

extension Duration {
    /// The duration in seconds, as a `Double`.
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
