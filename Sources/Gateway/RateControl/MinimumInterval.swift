/// `min_interval`: at most one message per interval.
struct MinimumInterval: Sendable {
    var seconds: Double
    var lastPublish: Double?

    init(seconds: Double) { self.seconds = seconds }

    /// The earliest time the next message may go out; nil: now.
    var nextAllowed: Double? {
        guard seconds > 0, let lastPublish else { return nil }
        return lastPublish + seconds
    }
}
