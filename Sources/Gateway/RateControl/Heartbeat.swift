/// `heartbeat`: republish the state at least once per period even when nothing changed.
struct Heartbeat: Sendable {
    var period: Double?

    /// When the next heartbeat is due after a publish at `lastPublish`.
    func next(after lastPublish: Double?) -> Double? {
        guard let period, let lastPublish else { return nil }
        return lastPublish + period
    }
}
