import JSON

/// `availability` in config.json: when devices are reported online/offline.
///
/// Connected devices follow their link. Advertisement-only devices are offline when no
/// advertisement arrived for `missed_intervals` × their learned advertising interval (at least
/// `minimum_timeout`), or for `fallback_timeout` while the interval is not learned yet.
public struct AvailabilitySettings: Sendable, Equatable {
    /// Publish `<base>/<device>/availability` at all.
    public var enabled = true
    public var missedIntervals = 10
    public var minimumTimeout: Double = 60
    public var fallbackTimeout: Double = 600

    public init() {}

    init(_ object: inout ConfigObject) {
        enabled = object.read("enabled", default: enabled) { try $0.bool() }
        missedIntervals = object.read("missed_intervals", default: missedIntervals) { try $0.integer(in: 1...1000) }
        minimumTimeout = object.read("minimum_timeout", default: minimumTimeout) { try $0.positiveDuration() }
        fallbackTimeout = object.read("fallback_timeout", default: fallbackTimeout) { try $0.positiveDuration() }
        object.finish()
    }
}
