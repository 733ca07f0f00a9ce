import JSON

/// `health` in config.json: the periodic `<base>/bridge/health` message.
public struct HealthSettings: Sendable, Equatable {
    /// Publish `bridge/health` at all.
    public var enabled = true
    /// Seconds between two health messages.
    public var interval: Double = 60

    public init() {}

    init(_ object: inout ConfigObject) {
        enabled = object.read("enabled", default: enabled) { try $0.bool() }
        interval = object.read("interval", default: interval) { reader in
            let seconds = try reader.duration()
            guard seconds >= 1 else { throw reader.fail("expected a duration of at least 1s, e.g. \"60s\"") }
            return seconds
        }
        object.finish()
    }
}
