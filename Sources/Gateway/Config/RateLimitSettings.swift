import JSON

/// `commands.rate_limit` in config.json: a token bucket per device — at most `burst` commands
/// at once, then one more per `interval`. A refused command answers `error` "rate limited".
public struct RateLimitSettings: Sendable, Equatable {
    public var enabled = true
    /// Commands a device takes back to back.
    public var burst = 10
    /// Seconds until the bucket gains one command back.
    public var interval: Double = 1

    public init() {}

    init(_ object: inout ConfigObject) {
        enabled = object.read("enabled", default: enabled) { try $0.bool() }
        burst = object.read("burst", default: burst) { try $0.integer(in: 1...10_000) }
        interval = object.read("interval", default: interval) { try $0.positiveDuration() }
        object.finish()
    }
}
