/// A FIFO of QoS 1/2 publishes waiting for a connection or for room in the in-flight window:
/// an array with a moving head, compacted when half of it is consumed (amortised O(1)), and
/// its buffer released when it empties after a burst.
struct Outbox<Element> {
    private var items: [Element?] = []
    private var head = 0

    var isEmpty: Bool { head == items.count }
    var count: Int { items.count - head }

    mutating func append(_ element: Element) { items.append(element) }

    mutating func popFirst() -> Element? {
        guard head < items.count else { return nil }
        let element = items[head]
        items[head] = nil
        head += 1
        if head == items.count {
            // Empty: the buffer a burst grew goes back (a small one is kept for reuse).
            items.removeAll(keepingCapacity: items.capacity <= 1024)
            head = 0
        } else if head >= 1024 && head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
        return element
    }

    mutating func removeAll() -> [Element] {
        let rest = items[head...].compactMap { $0 }
        items.removeAll()
        head = 0
        return rest
    }
}
