import JSON

extension JSONReader {
    /// A scenario duration: as ``JSONReader/duration()`` ("500ms", "2s", "5m", seconds), at most
    /// ``ScenarioLimits/maxDuration`` — beyond it the simulator's nanosecond timers would trap.
    func scenarioDuration() throws -> Double {
        let seconds = try duration()
        guard seconds <= ScenarioLimits.maxDuration else {
            throw fail("expected a duration of at most 365 days (\(Int(ScenarioLimits.maxDuration))s), got \(seconds)s")
        }
        return seconds
    }
}
