import EventLoop

#if canImport(Glibc)
    import Glibc
#endif

/// The clocks of advertising: the monotonic nanoseconds of `EventLoop.now()` deadlines are on,
/// and the wall clock that aligned devices keep to.
enum AdvertisingClock {
    /// `seconds` after `instant` on the monotonic nanosecond clock. A scenario's interval may be
    /// any duration; one past the clock's range gives its end (that device never advertises again).
    static func later(_ instant: UInt64, by seconds: Double) -> UInt64 {
        let (sum, overflow) = instant.addingReportingOverflow(UInt64(saturating: seconds * 1e9))
        return overflow ? .max : sum
    }

    /// The wall clock's slot of `interval` nearest to `wall` (slot k is at k × interval seconds
    /// since the epoch; a timer fires a little early or late) and the seconds until the next one.
    static func slot(_ interval: Double, wall: Double) -> (slot: Int64, untilNext: Double) {
        let slot = (wall / interval).rounded()
        return (Int64(slot), max(0, (slot + 1) * interval - wall))
    }

    /// Now on the monotonic clock (`EventLoop.now()`, ns) and on the wall clock (seconds since
    /// the epoch), read together: an aligned device's next slot, reckoned on the
    /// wall clock, becomes a deadline after the monotonic `now` without the time spent since (the
    /// reports of a loop turn), so aligned devices of one interval stay exactly together.
    static func now() -> (now: UInt64, wall: Double) {
        let now = EventLoop.now()
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return (now, Double(time.tv_sec) + Double(time.tv_nsec) / 1e9)
    }
}
