/// An operation did not finish before its deadline.
struct DeadlineExceeded: Error {}

/// Runs `operation` in a child task, giving up at `deadline` on `clock` (the operation is
/// cancelled; ports honour cancellation so the call returns promptly). For the GATT operations
/// of a job: structured, so cancelling the job cancels both.
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
