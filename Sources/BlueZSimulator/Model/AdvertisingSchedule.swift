import EventLoop

#if canImport(Glibc)
    import Glibc
#endif

/// When each advertising device sends its next report: a binary min-heap of (deadline, key), so
/// thousands of devices cost one loop timer (armed for the earliest deadline) and O(log n) per
/// report. Entries of devices that stopped advertising are dropped when they surface.
struct AdvertisingSchedule<Key: Hashable> {
    private var heap: [(deadline: UInt64, key: Key)] = []

    var isEmpty: Bool { heap.isEmpty }
    var count: Int { heap.count }
    var earliest: UInt64? { heap.first?.deadline }

    mutating func removeAll() { heap.removeAll() }

    /// Drops the entries whose key matches (linear, then the heap is rebuilt; for the rare end of
    /// a scan, so a scan started again soon after schedules each device once, not twice).
    mutating func removeAll(where shouldRemove: (Key) -> Bool) {
        let kept = heap.filter { !shouldRemove($0.key) }
        guard kept.count != heap.count else { return }
        heap.removeAll(keepingCapacity: true)
        for entry in kept { insert(entry.key, at: entry.deadline) }
    }

    /// Whether `key` has an entry (linear; for the rare re-arming of a device).
    func contains(_ key: Key) -> Bool { heap.contains { $0.key == key } }

    mutating func insert(_ key: Key, at deadline: UInt64) {
        heap.append((deadline, key))
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].deadline < heap[parent].deadline else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    /// Removes and returns the entry with the earliest deadline if it is due at `now`.
    mutating func popDue(now: UInt64) -> (deadline: UInt64, key: Key)? {
        guard let first = heap.first, first.deadline <= now else { return nil }
        let last = heap.removeLast()
        if !heap.isEmpty {
            heap[0] = last
            var parent = 0
            while true {
                let left = 2 * parent + 1, right = left + 1
                var smallest = parent
                if left < heap.count && heap[left].deadline < heap[smallest].deadline { smallest = left }
                if right < heap.count && heap[right].deadline < heap[smallest].deadline { smallest = right }
                if smallest == parent { break }
                heap.swapAt(parent, smallest)
                parent = smallest
            }
        }
        return first
    }
}

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
