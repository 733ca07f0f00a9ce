/// Bounds on the numbers of a scenario file that the simulator turns into work or timers.
public enum ScenarioLimits {
    /// The longest duration a scenario may give (intervals, delays, timeouts, event times): 365
    /// days. The simulator arms its timers in UInt64 nanoseconds of the monotonic clock, which
    /// holds about 584 years; a longer duration (say `"1e300s"`) would trap there, and nothing a
    /// simulated world does needs more than a year.
    public static let maxDuration: Double = 365 * 24 * 3600
}
