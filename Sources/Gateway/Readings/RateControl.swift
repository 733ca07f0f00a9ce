/// Rate control of one device's state messages, composed from three small filters (ESPHome's
/// `throttle`, `delta` and `heartbeat`): `min_interval` (at most one message per interval),
/// `only_changes` with `thresholds` (publish only when an attribute changed enough) and
/// `heartbeat` (republish at least once per period).
///
/// A value type holding only what changes per device — the settings are the rule's, passed in:
/// ``offer(_:settings:names:now:)`` says what to do with new readings, ``due(now:settings:)``
/// whether a timer should publish, ``published(_:settings:now:)`` records what went out;
/// ``nextDeadline(settings:)`` is when the caller should look again.
struct RateControl: Sendable {
    enum Decision: Equatable {
        /// Publish the state now.
        case publish
        /// Publish at `until` (the readings are merged into the state meanwhile).
        case deferred(until: Double)
        /// Nothing changed enough to publish.
        case drop
    }

    /// The state last published, for `only_changes` (empty without it).
    private var lastState: [Attribute] = []
    /// When the last message went out; NaN for never (a `Double?` would take 16 bytes).
    private var lastPublishTime = Double.nan
    private var pending = false

    init() {}

    /// When the last message went out; nil before the first.
    var lastPublish: Double? { lastPublishTime.isNaN ? nil : lastPublishTime }

    /// `min_interval`: the earliest time the next message may go out; nil: now.
    private func nextAllowed(_ settings: RateControlSettings) -> Double? {
        guard settings.minInterval > 0, let lastPublish else { return nil }
        return lastPublish + settings.minInterval
    }

    /// `heartbeat`: when the next one is due after the last publish.
    private func nextHeartbeat(_ settings: RateControlSettings) -> Double? {
        guard let period = settings.heartbeat, let lastPublish else { return nil }
        return lastPublish + period
    }

    /// `only_changes` with per-attribute `thresholds`: a state is a change when an attribute is
    /// new, differs in kind or text, or a number moved by at least its threshold (default: any
    /// amount) since the last published state.
    private func isChange(_ state: [Attribute], _ settings: RateControlSettings, _ names: [String]) -> Bool {
        guard settings.onlyChanges else { return true }
        for attribute in state {
            guard let old = lastState.first(where: { $0.name == attribute.name }) else { return true }
            if old.stored == attribute.stored { continue }
            if case .number(let new) = attribute.stored, case .number(let previous) = old.stored,
                let threshold = settings.thresholds.first(where: { $0.name == names[Int(attribute.name)] })?.delta
            {
                if abs(new - previous) >= threshold { return true }
                continue
            }
            return true
        }
        return false
    }

    /// New readings arrived at `now` (`state` is the device state with them merged in).
    mutating func offer(_ state: [Attribute], settings: RateControlSettings, names: [String], now: Double) -> Decision {
        guard isChange(state, settings, names) else {
            return pending ? .deferred(until: nextAllowed(settings) ?? now) : .drop
        }
        if let next = nextAllowed(settings), now < next {
            pending = true
            return .deferred(until: next)
        }
        return .publish
    }

    /// True when a deferred publish or a heartbeat is due at `now`.
    func due(now: Double, settings: RateControlSettings) -> Bool {
        if pending, let next = nextAllowed(settings) { return now >= next }
        if let beat = nextHeartbeat(settings) { return now >= beat }
        return false
    }

    /// When ``due(now:settings:)`` next becomes true, nil when nothing is planned.
    func nextDeadline(settings: RateControlSettings) -> Double? {
        if pending { return nextAllowed(settings) }
        return nextHeartbeat(settings)
    }

    /// The state `state` was published at `now`.
    mutating func published(_ state: [Attribute], settings: RateControlSettings, now: Double) {
        lastPublishTime = now
        pending = false
        if settings.onlyChanges { lastState = state }
    }
}
