/// Rate control of one device's state messages, composed from three small filters (ESPHome's
/// `throttle`, `delta` and `heartbeat`): ``MinimumInterval``, ``ChangeFilter``, ``Heartbeat``.
///
/// A value type: ``offer(_:now:)`` says what to do with new readings, ``due(now:)`` whether a
/// timer should publish, ``published(_:now:)`` records what went out; ``nextDeadline`` is when
/// the caller should look again.
struct RateControl: Sendable {
    enum Decision: Equatable {
        /// Publish the state now.
        case publish
        /// Publish at `until` (the readings are merged into the state meanwhile).
        case deferred(until: Double)
        /// Nothing changed enough to publish.
        case drop
    }

    private var interval: MinimumInterval
    private var changes: ChangeFilter
    private var heartbeat: Heartbeat
    private var pending = false

    init(_ settings: RateControlSettings) {
        interval = MinimumInterval(seconds: settings.minInterval)
        changes = ChangeFilter(enabled: settings.onlyChanges, thresholds: settings.thresholds)
        heartbeat = Heartbeat(period: settings.heartbeat)
    }

    /// New readings arrived at `now` (`state` is the device state with them merged in).
    mutating func offer(_ state: [Attribute], now: Double) -> Decision {
        guard changes.isChange(state) else { return pending ? .deferred(until: interval.nextAllowed ?? now) : .drop }
        if let next = interval.nextAllowed, now < next {
            pending = true
            return .deferred(until: next)
        }
        return .publish
    }

    /// True when a deferred publish or a heartbeat is due at `now`.
    func due(now: Double) -> Bool {
        if pending, let next = interval.nextAllowed { return now >= next }
        if let beat = heartbeat.next(after: interval.lastPublish) { return now >= beat }
        return false
    }

    /// When ``due(now:)`` next becomes true, nil when nothing is planned.
    var nextDeadline: Double? {
        if pending { return interval.nextAllowed }
        return heartbeat.next(after: interval.lastPublish)
    }

    /// The state `state` was published at `now`.
    mutating func published(_ state: [Attribute], now: Double) {
        interval.lastPublish = now
        pending = false
        changes.record(state)
    }
}
