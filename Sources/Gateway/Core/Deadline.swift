/// An operation did not finish before its deadline.
struct DeadlineExceeded: Error {}

/// Runs `operation` in a child task, giving up at `deadline` on `clock`: the operation is then
/// cancelled, this returns once it has ended (ports honour cancellation, so that is prompt) and
/// throws ``DeadlineExceeded``. Structured, so cancelling the caller cancels both: the GATT
/// operations of a job, the connect job's discovery, and the waits of ``Gateway/stop(timeout:)``
/// (`try?`: nil when the deadline passed first).
func withDeadline<T: Sendable>(
    _ deadline: Double, clock: any GatewayClock,
    _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            try await clock.sleep(until: deadline)
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else { throw DeadlineExceeded() }
        return value
    }
}
