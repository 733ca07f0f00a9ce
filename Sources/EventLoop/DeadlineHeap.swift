/// Entries ordered by a deadline (ns on the loop's clock, ``EventLoop/now()``): a binary
/// min-heap, O(log n) to insert and to take the earliest. The loop keeps its timers in one (the
/// earliest arms `poll()`'s timeout); the BlueZ simulator keeps its advertisers' next reports in
/// another, so thousands of devices cost one loop timer. Neither removes an entry when its timer
/// or device is cancelled: a stale entry is skipped when it surfaces.
public struct DeadlineHeap<Key> {
    @usableFromInline var entries: [(deadline: UInt64, key: Key)] = []

    @inlinable public init() {}

    @inlinable public var isEmpty: Bool { entries.isEmpty }
    @inlinable public var count: Int { entries.count }
    /// The entry with the earliest deadline.
    @inlinable public var first: (deadline: UInt64, key: Key)? { entries.first }
    @inlinable public var earliest: UInt64? { entries.first?.deadline }

    @inlinable
    public mutating func insert(_ key: Key, at deadline: UInt64) {
        entries.append((deadline, key))
        var child = entries.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard entries[child].deadline < entries[parent].deadline else { break }
            entries.swapAt(child, parent)
            child = parent
        }
    }

    /// Removes and returns the entry with the earliest deadline.
    @inlinable
    public mutating func popFirst() -> (deadline: UInt64, key: Key)? {
        guard !entries.isEmpty else { return nil }
        entries.swapAt(0, entries.count - 1)
        let first = entries.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < entries.count && entries[left].deadline < entries[smallest].deadline { smallest = left }
            if right < entries.count && entries[right].deadline < entries[smallest].deadline { smallest = right }
            if smallest == parent { break }
            entries.swapAt(parent, smallest)
            parent = smallest
        }
        return first
    }

    /// Removes and returns the entry with the earliest deadline if it is due at `now`.
    @inlinable
    public mutating func popDue(now: UInt64) -> (deadline: UInt64, key: Key)? {
        guard let deadline = entries.first?.deadline, deadline <= now else { return nil }
        return popFirst()
    }

    @inlinable public mutating func removeAll() { entries.removeAll() }

    /// Drops the entries whose key matches (linear, then the heap is rebuilt: for rare changes,
    /// such as the end of a scan).
    @inlinable
    public mutating func removeAll(where shouldRemove: (Key) -> Bool) {
        let kept = entries.filter { !shouldRemove($0.key) }
        guard kept.count != entries.count else { return }
        entries.removeAll(keepingCapacity: true)
        for entry in kept { insert(entry.key, at: entry.deadline) }
    }
}

extension DeadlineHeap where Key: Equatable {
    /// Whether `key` has an entry (linear: for rare checks).
    @inlinable public func contains(_ key: Key) -> Bool { entries.contains { $0.key == key } }
}
