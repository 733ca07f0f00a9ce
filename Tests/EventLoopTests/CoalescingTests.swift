import EventLoop
import Foundation
import Glibc
import Testing

/// A pipe whose read end a test watches on a loop; closed by ``close()``.
private final class TestPipe: Sendable {
    let readFD: Int32
    let writeFD: Int32

    init() {
        var fds: [Int32] = [0, 0]
        precondition(pipe(&fds) == 0)
        _ = fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK)
        readFD = fds[0]
        writeFD = fds[1]
    }

    func send(_ count: Int = 1) {
        let bytes = [UInt8](repeating: 7, count: count)
        _ = bytes.withUnsafeBytes { write(writeFD, $0.baseAddress, $0.count) }
    }

    /// Reads at most `limit` bytes; returns how many.
    func drain(limit: Int = 4096) -> Int {
        var buffer = [UInt8](repeating: 0, count: limit)
        return max(0, read(readFD, &buffer, limit))
    }

    func close() {
        Glibc.close(readFD)
        Glibc.close(writeFD)
    }
}

/// What a watch's handler saw: when it ran (`EventLoop.now()`) and the bytes it read in all.
private struct Handled {
    var calls: [UInt64] = []
    var bytes = 0
}

@Suite("Event loop: coalesced watches")
struct CoalescingTests {
    /// Watches `pipe` on `loop` with `coalescing` seconds; each call reads at most `readLimit` bytes.
    private static func watch(
        _ pipe: TestPipe, on loop: EventLoop, coalescing: Double, readLimit: Int = 4096, into handled: Shared<Handled>
    ) async throws -> EventLoop.Token {
        try await loop.submit {
            let token = loop.addWatch(fd: pipe.readFD, events: .readable) { _ in
                let count = pipe.drain(limit: readLimit)
                handled.withLock {
                    $0.calls.append(EventLoop.now())
                    $0.bytes += count
                }
            }
            loop.setCoalescing(token, interval: coalescing)
            return token
        }
    }

    /// Writes one byte every 2 ms for `seconds`, from a thread of its own (the whole suite at
    /// once keeps the cooperative pool busy for seconds, which would clump a task's writes);
    /// returns the bytes written.
    private static func stream(_ pipe: TestPipe, seconds: Double) async throws -> Int {
        await withCheckedContinuation { continuation in
            let writer = Thread {
                let end = EventLoop.now() + UInt64(seconds * 1e9)
                var written = 0
                while EventLoop.now() < end {
                    pipe.send()
                    written += 1
                    usleep(2000)
                }
                continuation.resume(returning: written)
            }
            writer.start()
        }
    }

    @Test(
        "under a steady stream a coalesced watch is handled about once per interval and reads all of it; without, once per arrival"
    )
    func steadyStream() async throws {
        for coalescing in [0.1, 0] {
            // The pipe closes after the loop stopped: a descriptor closed while still watched could be
            // handed to another test's new pipe, and this loop's handler would read that test's bytes.
            let pipe = TestPipe()
            defer { pipe.close() }
            let loop = EventLoop()
            defer { loop.shutdown() }
            let handled = Shared(Handled())
            _ = try await Self.watch(pipe, on: loop, coalescing: coalescing, into: handled)
            let written = try await Self.stream(pipe, seconds: 0.6)
            try await Task.sleep(for: .milliseconds(250))  // the last rest ends, the rest is read
            let seen = handled.withLock { $0 }
            #expect(seen.bytes == written)
            if coalescing > 0 {
                // 0.6 s at 100 ms: about 7 handlings (the first at once), not one per byte.
                #expect(seen.calls.count <= 10, "\(seen.calls.count) handlings of \(written) bytes")
                // After the first, handlings a rest apart (a second call of the same turn aside).
                let gaps = zip(seen.calls.dropFirst(), seen.calls).map { Double($0 - $1) / 1e6 }
                #expect(gaps.allSatisfy { $0 >= 99 || $0 < 5 }, "gaps \(gaps) ms")
            } else {
                // About one per arrival; a loaded machine (the whole suite at once on 2 cores)
                // may delay the loop's thread and clump some, so "more often than coalesced".
                #expect(seen.calls.count > 10, "\(seen.calls.count) handlings of \(written) bytes")
            }
        }
    }

    /// Waits until `condition` holds (checked every 10 ms), at most `seconds`.
    private static func waitUntil(_ seconds: Double, _ condition: () async throws -> Bool) async throws {
        let end = EventLoop.now() + UInt64(seconds * 1e9)
        while try await !condition(), EventLoop.now() < end { try await Task.sleep(for: .milliseconds(10)) }
    }

    @Test(
        "the first arrival after a quiet spell is handled at once; the next waits for the rest to end; then the loop sleeps"
    )
    func quietThenRest() async throws {
        // The pipe closes after the loop stopped: a descriptor closed while still watched could be
        // handed to another test's new pipe, and this loop's handler would read that test's bytes.
        let pipe = TestPipe()
        defer { pipe.close() }
        let loop = EventLoop()
        defer { loop.shutdown() }
        let handled = Shared(Handled())
        let token = try await Self.watch(pipe, on: loop, coalescing: 3, into: handled)
        let turns = Shared(0)
        try await loop.submit { _ = loop.addPrepareHook { turns.withLock { $0 += 1 } } }
        let sent = EventLoop.now()
        pipe.send()
        try await Self.waitUntil(5) { handled.withLock { $0.calls.count } == 1 }
        let first = try #require(handled.withLock { $0.calls.first })
        // At once: well before the rest's 3 s (a loaded machine may delay the loop's thread).
        #expect(first - sent < 1_500_000_000, "the first byte waited \(Double(first - sent) / 1e6) ms")
        #expect(try await loop.submit { loop.isResting(token) })
        pipe.send()
        try await Self.waitUntil(5) { handled.withLock { $0.calls.count } == 2 }
        let calls = handled.withLock { $0.calls }
        #expect(calls.count == 2)
        #expect(calls.count == 2 && calls[1] - calls[0] >= 3_000_000_000, "read during the rest")
        // Nothing arrives any more: the rest after the second handling ends, and the loop then
        // sleeps in poll() — a few turns in 0.6 s, not a turn per interval.
        try await Self.waitUntil(5) { try await loop.submit { !loop.isResting(token) } }
        let before = turns.withLock { $0 }
        try await Task.sleep(for: .milliseconds(600))
        #expect(turns.withLock { $0 } - before <= 2)
    }

    @Test("a handler that reads part of what is there is called again in the same turn, so no backlog waits a rest")
    func partialReadsDrain() async throws {
        // The pipe closes after the loop stopped: a descriptor closed while still watched could be
        // handed to another test's new pipe, and this loop's handler would read that test's bytes.
        let pipe = TestPipe()
        defer { pipe.close() }
        let loop = EventLoop()
        defer { loop.shutdown() }
        let handled = Shared(Handled())
        // A rest of 30 s: what is read within 10 s was read without one (however loaded the machine).
        let token = try await Self.watch(pipe, on: loop, coalescing: 30, readLimit: 1, into: handled)
        pipe.send(10)
        try await Self.waitUntil(10) { handled.withLock { $0 }.bytes == 10 }
        #expect(handled.withLock { $0 }.bytes == 10, "the rest of a handling was left for the next")
        // The rest ended (set to 0 and back), then more than the rounds of one handling: still
        // ready after them, so no rest; read on.
        try await loop.submit {
            loop.setCoalescing(token, interval: 0)
            loop.setCoalescing(token, interval: 30)
        }
        pipe.send(EventLoop.coalescedRounds * 3)
        try await Self.waitUntil(10) { handled.withLock { $0 }.bytes == 10 + EventLoop.coalescedRounds * 3 }
        #expect(handled.withLock { $0 }.bytes == 10 + EventLoop.coalescedRounds * 3)
    }

    @Test("a watch removed while it rests is not called again; coalescing 0 ends a rest at once")
    func removeAndUncoalesce() async throws {
        // The pipe closes after the loop stopped: a descriptor closed while still watched could be
        // handed to another test's new pipe, and this loop's handler would read that test's bytes.
        let pipe = TestPipe()
        defer { pipe.close() }
        let loop = EventLoop()
        defer { loop.shutdown() }
        let handled = Shared(Handled())
        let token = try await Self.watch(pipe, on: loop, coalescing: 30, into: handled)
        pipe.send()
        try await Self.waitUntil(5) { handled.withLock { $0.calls.count } == 1 }
        #expect(try await loop.submit { loop.isResting(token) })
        try await loop.submit { loop.removeWatch(token) }
        #expect(try await loop.submit { !loop.isResting(token) })
        pipe.send()
        try await Task.sleep(for: .milliseconds(300))
        #expect(handled.withLock { $0 }.calls.count == 1)

        // A new watch on the same descriptor reads the byte at once, rests, and set to 0 reads on.
        let again = Shared(Handled())
        let second = try await Self.watch(pipe, on: loop, coalescing: 30, into: again)
        try await Self.waitUntil(5) { again.withLock { $0 }.bytes == 1 }
        #expect(again.withLock { $0 }.bytes == 1)
        pipe.send()
        try await Task.sleep(for: .milliseconds(100))
        #expect(again.withLock { $0 }.bytes == 1, "read during the rest")
        try await loop.submit { loop.setCoalescing(second, interval: 0) }
        try await Self.waitUntil(4) { again.withLock { $0 }.bytes == 2 }
        #expect(again.withLock { $0 }.bytes == 2)
        #expect(try await loop.submit { !loop.isResting(second) })
    }

    @Test("the loop shuts down while a watch rests; its handler is not called")
    func shutdownWhileResting() async throws {
        let loop = EventLoop()
        let pipe = TestPipe()
        defer { pipe.close() }
        let handled = Shared(Handled())
        let token = try await Self.watch(pipe, on: loop, coalescing: 30, into: handled)
        pipe.send()
        try await Self.waitUntil(5) { handled.withLock { $0.calls.count } == 1 }
        #expect(try await loop.submit { loop.isResting(token) })
        pipe.send()
        let start = EventLoop.now()
        loop.shutdown()
        #expect(EventLoop.now() - start < 5_000_000_000, "shutdown waited for the rest")
        #expect(handled.withLock { $0 }.calls.count == 1)
    }
}
