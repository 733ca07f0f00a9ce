import JSON

/// A device rule's rate control: `min_interval`, `only_changes`, `heartbeat`, `thresholds`.
public struct RateControlSettings: Sendable, Equatable {
    /// At most one state message per this many seconds; readings in between are merged and go
    /// out when the interval ends (0: no limit).
    public var minInterval: Double = 0
    /// Publish only when an attribute changed (by at least its threshold). Defaults to true when
    /// `thresholds` is given, else false.
    public var onlyChanges = false
    /// Republish the state at least this often even without changes (nil: never).
    public var heartbeat: Double?
    /// Per attribute: the smallest absolute change of a number that counts as a change.
    public var thresholds: [(name: String, delta: Double)] = []

    public init() {}

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.minInterval == rhs.minInterval && lhs.onlyChanges == rhs.onlyChanges && lhs.heartbeat == rhs.heartbeat
            && lhs.thresholds.map(\.name) == rhs.thresholds.map(\.name)
            && lhs.thresholds.map(\.delta) == rhs.thresholds.map(\.delta)
    }

    init(_ object: inout ConfigObject) {
        let problems = object.problems
        minInterval = object.read("min_interval", default: 0) { try $0.duration() }
        heartbeat = object.optional("heartbeat") { try $0.positiveDuration() }
        if let value = object.value("thresholds"), let thresholds = ConfigObject(value, problems) {
            for (name, reader) in thresholds.reader.entries() {
                guard let delta = problems.attempt({ try reader.number() }) else { continue }
                if delta < 0 {
                    problems.add(reader.path, "expected a change ≥ 0, got \(delta)")
                } else {
                    self.thresholds.append((name, delta))
                }
            }
        }
        onlyChanges = object.read("only_changes", default: !thresholds.isEmpty) { try $0.bool() }
        if let heartbeat, minInterval > heartbeat {
            problems.add(
                object.childPath("heartbeat"), "must be at least min_interval (\(minInterval)s), got \(heartbeat)s")
        }
    }
}
