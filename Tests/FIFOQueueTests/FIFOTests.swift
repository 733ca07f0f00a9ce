import FIFOQueue
import Testing

@Suite("FIFO: the one first-in first-out queue")
struct FIFOTests {
    @Test("elements leave in the order they came, also when appends and removals interleave and the ring wraps")
    func order() {
        var queue = FIFO<Int>()
        var expected = 0
        var next = 0
        for round in 0..<500 {
            for _ in 0..<(round % 7 + 1) {
                queue.append(next)
                next += 1
            }
            for _ in 0..<(round % 5) where !queue.isEmpty {
                #expect(queue.removeFirst() == expected)
                expected += 1
            }
            #expect(queue.count == next - expected)
            #expect(Array(queue) == Array(expected..<next))
            #expect(queue.first == (queue.isEmpty ? nil : expected) && queue.last == (queue.isEmpty ? nil : next - 1))
        }
        while let element = queue.popFirst() {
            #expect(element == expected)
            expected += 1
        }
        #expect(expected == next && queue.isEmpty && queue.popFirst() == nil)
    }

    @Test("subscripts count from the oldest, across the wrap, and can change an element in place")
    func subscripts() {
        var queue: FIFO = [1, 2, 3]
        for value in 4...20 {
            queue.removeFirst()
            queue.append(value)
        }
        #expect(Array(queue) == [18, 19, 20])
        queue[1] = 0
        #expect(queue[0] == 18 && queue[1] == 0 && queue[2] == 20)
    }

    @Test("a copy is a value: changing one leaves the other as it was")
    func copyOnWrite() {
        var original: FIFO = [1, 2, 3]
        var copy = original
        copy.removeFirst()
        copy.append(4)
        copy[0] = 9
        #expect(Array(original) == [1, 2, 3] && Array(copy) == [9, 3, 4])
        original.append(5)
        #expect(Array(original) == [1, 2, 3, 5] && Array(copy) == [9, 3, 4])
        let third = original
        original.removeAll(keepingCapacity: true)
        #expect(original.isEmpty && Array(third) == [1, 2, 3, 5])
    }

    final class Tracked {}

    @Test(
        "removeAll empties the queue and frees its storage unless asked to keep it; a removed element is released at once"
    )
    func removeAll() {
        var queue = FIFO<Tracked>()
        weak var removed: Tracked?
        do {
            let element = Tracked()
            removed = element
            queue.append(element)
        }
        queue.append(Tracked())
        #expect(removed != nil)
        queue.removeFirst()
        #expect(removed == nil, "the queue still holds a removed element")
        queue.removeAll(keepingCapacity: true)
        #expect(queue.isEmpty && queue.count == 0 && queue.first == nil && queue.capacity > 0)
        for _ in 0..<10 { queue.append(Tracked()) }
        weak let held = queue.last
        queue.removeAll()
        #expect(queue.isEmpty && queue.capacity == 0 && held == nil)
    }

    @Test(
        "the storage stays bounded by the most elements queued at once over a million append/remove cycles, and a burst's storage is given back"
    )
    func boundedStorage() {
        var queue = FIFO<Int>()
        for value in 0..<1_000_000 {
            queue.append(value)
            if value % 3 != 0 || queue.count > 8 { queue.removeFirst() }
        }
        #expect(queue.count <= 9 && queue.capacity <= 16)
        for value in 0..<100_000 { queue.append(value) }
        #expect(queue.capacity >= 100_000)
        while queue.count > 10 { queue.removeFirst() }
        #expect(queue.capacity <= FIFO<Int>.retainedCapacity, "a burst drained to 10 keeps \(queue.capacity) slots")
        while !queue.isEmpty { queue.removeFirst() }
        #expect(queue.capacity <= FIFO<Int>.retainedCapacity)
    }

    /// Draining one at a time costs the same per element however long the queue: ten times the
    /// elements take about ten times as long (an array's removeFirst would take a hundred times).
    @Test("removeFirst is O(1): draining ten times the elements takes well under a hundred times as long")
    func removeFirstIsConstantTime() {
        func drain(_ count: Int) -> Duration {
            var queue = FIFO<[Int]>()
            for value in 0..<count { queue.append([value]) }
            let clock = ContinuousClock()
            let start = clock.now
            var sum = 0
            while !queue.isEmpty { sum &+= queue.removeFirst()[0] }
            #expect(sum == count * (count - 1) / 2)
            return clock.now - start
        }
        let small = (0..<3).map { _ in drain(20_000) }.min() ?? .zero
        let large = (0..<3).map { _ in drain(200_000) }.min() ?? .zero
        #expect(large < small * 40, "20 000 elements drained in \(small), 200 000 in \(large)")
    }
}
