import EventLoop
import Testing

@Suite("DeadlineHeap: the loop's timers and the simulator's advertisers, earliest deadline first")
struct DeadlineHeapTests {
    @Test("due entries come out in deadline order, and only those due")
    func dueInOrder() {
        var heap = DeadlineHeap<Int>()
        for (key, deadline) in [(1, 50), (2, 10), (3, 30), (4, 20)] { heap.insert(key, at: UInt64(deadline)) }
        var order: [Int] = []
        while let (_, key) = heap.popDue(now: 35) { order.append(key) }
        #expect(order == [2, 4, 3])
        #expect(heap.earliest == 50 && heap.count == 1)
        #expect(heap.popDue(now: 49) == nil)
        #expect(heap.popFirst()?.key == 1 && heap.isEmpty && heap.popFirst() == nil)
    }

    @Test("thousands of random deadlines come out sorted, equal deadlines included")
    func sortsRandomDeadlines() {
        var generator = SystemRandomNumberGenerator()
        var heap = DeadlineHeap<Int>()
        var deadlines: [UInt64] = []
        for key in 0..<5_000 {
            let deadline = UInt64.random(in: 0..<1_000, using: &generator)
            deadlines.append(deadline)
            heap.insert(key, at: deadline)
        }
        var popped: [UInt64] = []
        while let entry = heap.popFirst() {
            #expect(deadlines[entry.key] == entry.deadline)
            popped.append(entry.deadline)
        }
        #expect(popped == deadlines.sorted())
    }

    @Test("removeAll(where:) keeps the others in order; contains finds a key")
    func removeWhere() {
        var heap = DeadlineHeap<Int>()
        for key in 0..<10 { heap.insert(key, at: UInt64(100 - key)) }
        #expect(heap.contains(3))
        heap.removeAll { $0 % 2 == 1 }
        #expect(!heap.contains(3) && heap.count == 5)
        var keys: [Int] = []
        while let entry = heap.popFirst() { keys.append(entry.key) }
        #expect(keys == [8, 6, 4, 2, 0])
    }
}
