/// Bounded waits for async tests: every wait names what it waits for and fails with
/// ``TestTimeout`` instead of hanging the suite.
///
/// A deadline here is a failure detector, not a speed check: the whole suite runs at once on a
/// 2-core CI machine, where a task can wait seconds for a thread. The defaults are generous
/// (``defaultWait``); the normal case returns as soon as the awaited thing happens.

/// Seconds a wait allows unless the test says otherwise.
public let defaultWait: Double = 30

/// A test waited longer than it allows.
public struct TestTimeout: Error, CustomStringConvertible {
    public var description: String
    public init(description: String) { self.description = description }
}

/// Runs `body`, failing with ``TestTimeout`` when it takes longer than `seconds`.
public func within<T: Sendable>(_ seconds: Double, _ what: String, _ body: @escaping @Sendable () async throws -> T)
    async throws -> T
{
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            throw TestTimeout(description: "\(what): nothing within \(seconds) s")
        }
        defer { group.cancelAll() }
        guard let first = try await group.next() else { throw TestTimeout(description: what) }
        return first
    }
}

/// The first element of `stream` satisfying `predicate`, within `seconds`.
public func first<S: AsyncSequence & Sendable>(
    _ stream: S, within seconds: Double = defaultWait, _ what: String,
    where predicate: @escaping @Sendable (S.Element) -> Bool = { _ in true }
) async throws -> S.Element where S.Element: Sendable {
    try await within(seconds, what) {
        for try await element in stream where predicate(element) { return element }
        throw TestTimeout(description: "\(what): the stream ended")
    }
}

/// The first `count` elements of `stream`, within `seconds`.
public func collect<S: AsyncSequence & Sendable>(
    _ stream: S, count: Int, within seconds: Double = defaultWait, _ what: String
) async throws -> [S.Element] where S.Element: Sendable {
    try await within(seconds, what) {
        var out: [S.Element] = []
        for try await element in stream {
            out.append(element)
            if out.count == count { return out }
        }
        throw TestTimeout(description: "\(what): the stream ended after \(out.count)")
    }
}

/// Polls `condition` every 10 ms until true, within `seconds` (for state only observable by asking).
public func eventually(
    _ what: String, within seconds: Double = defaultWait, _ condition: @escaping @Sendable () async throws -> Bool
) async throws {
    try await within(seconds, what) {
        while try await !condition() { try await Task.sleep(for: .milliseconds(10)) }
    }
}
