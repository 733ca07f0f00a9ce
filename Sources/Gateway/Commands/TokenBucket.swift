/// A token bucket on the monotonic clock: holds up to `capacity` tokens, gains one every
/// `interval` seconds, and ``take(now:)`` spends one when there is one.
struct TokenBucket: Sendable, Equatable {
    let capacity: Double
    let interval: Double
    private(set) var tokens: Double
    private var updatedAt: Double

    /// A full bucket at `now`.
    init(capacity: Int, interval: Double, now: Double) {
        self.capacity = Double(max(1, capacity))
        self.interval = max(interval, 1e-9)
        tokens = self.capacity
        updatedAt = now
    }

    /// Spends a token; false (nothing spent) when the bucket is empty.
    mutating func take(now: Double) -> Bool {
        if now > updatedAt {
            tokens = min(capacity, tokens + (now - updatedAt) / interval)
            updatedAt = now
        }
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}
