import EventLoop
import Foundation
import GatewayRuntime
import Synchronization
import TestSupport
import Testing

@Suite("StopDeadline: the shares of the stop's 5 s")
struct StopDeadlineTests {
    @Test("gattway run's shares: 3 s of waits, then 0.5 s to close, within the 5 s bound")
    func limits() {
        #expect(StopDeadline.waitLimit == 3)
        #expect(StopDeadline.closeLimit == 0.5)
        #expect(StopDeadline.bound == 5)
        #expect(Double(StopDeadline.bound) > StopDeadline.waitLimit + StopDeadline.closeLimit)
    }

    @Test("the wait's remainder shrinks to 0; the close then still gets its own limit")
    func remainders() async throws {
        let deadline = StopDeadline(waitLimit: 1, closeLimit: 0.2)
        #expect(deadline.waitRemaining > 0.5 && deadline.waitRemaining <= 1)
        // While the wait lasts longer than the close limit, the close may take until its end.
        #expect(deadline.closeRemaining > 0.5 && deadline.closeRemaining <= 1)
        try await Task.sleep(for: .milliseconds(1100))
        #expect(deadline.elapsed >= 1.1)
        #expect(deadline.waitRemaining == 0)
        #expect(deadline.closeRemaining == 0.2)
    }

    @Test("bounded: an operation that ends in time returns true at once; one that does not is cancelled at the bound")
    func bounded() async throws {
        let started = Date()
        // Bounds far from the figures, so a test run that stalls the cooperative pool for seconds
        // (seen: 12 s on 2 cores) cannot blur the difference.
        #expect(await StopDeadline.bounded(120) { try? await Task.sleep(for: .milliseconds(20)) })
        #expect(Date().timeIntervalSince(started) < 60, "the sleep is cancelled as soon as the operation ends")
        let cancelled = Mutex(false)
        let slow = Date()
        let inTime = await StopDeadline.bounded(0.2) {
            do {
                try await Task.sleep(for: .seconds(600))
            } catch {
                cancelled.withLock { $0 = true }
            }
        }
        #expect(!inTime)
        #expect(cancelled.withLock { $0 })
        let took = Date().timeIntervalSince(slow)
        #expect(took >= 0.2 && took < 60, "\(took) s")
    }

    @Test("warning: called after its time on the loop unless cancelled first")
    func warning() async throws {
        let loop = EventLoop()
        defer { loop.shutdown() }
        let warned = Mutex<[String]>([])
        _ = StopDeadline.warning(after: 0.1, on: loop) { warned.withLock { $0.append("late") } }
        let cancelled = StopDeadline.warning(after: 0.1, on: loop) { warned.withLock { $0.append("cancelled") } }
        cancelled.cancel()
        try await Task.sleep(for: .milliseconds(400))
        #expect(warned.withLock { $0 } == ["late"])
    }
}
