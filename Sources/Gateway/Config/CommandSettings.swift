import JSON

/// `commands` at the top level of config.json: limits for every command.
public struct CommandSettings: Sendable, Equatable {
    /// A command not started within this many seconds of being sent is refused as `expired`
    /// (per-command `ttl` overrides).
    public var ttl: Double = 30
    /// Larger `/set` and `/get` payloads are refused.
    public var maxPayloadBytes = 1024
    /// At most this many commands wait per device; more are refused.
    public var queueLimit = 16
    /// A device connected only for commands is disconnected after this long without one.
    public var idleDisconnect: Double = 30
    /// Commands per device over time.
    public var rateLimit = RateLimitSettings()

    public init() {}

    init(_ object: inout ConfigObject) {
        ttl = object.read("ttl", default: ttl) { try $0.positiveDuration() }
        maxPayloadBytes = object.read("max_payload_bytes", default: maxPayloadBytes) {
            try $0.integer(in: 16...262_144)
        }
        queueLimit = object.read("queue_limit", default: queueLimit) { try $0.integer(in: 1...1000) }
        idleDisconnect = object.read("idle_disconnect", default: idleDisconnect) { try $0.positiveDuration() }
        if let value = object.value("rate_limit"), var section = ConfigObject(value, object.problems) {
            rateLimit = RateLimitSettings(&section)
        }
        object.finish()
    }
}
