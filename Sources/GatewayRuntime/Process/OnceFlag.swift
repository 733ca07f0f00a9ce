import Synchronization

/// A flag that can be claimed once from any thread (e.g. to resume a continuation exactly once).
public final class OnceFlag: Sendable {
    private let claimed = Mutex(false)

    public init() {}

    /// True for the first caller only.
    public func claim() -> Bool {
        claimed.withLock { claimed in
            defer { claimed = true }
            return !claimed
        }
    }
}
