import EventLoop
import Glibc
import Synchronization
import Testing

/// A mutex-guarded value that closures on other threads may share.
final class Shared<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<R>(_ body: (inout Value) -> R) -> R { mutex.withLock { body(&$0) } }
}

/// An actor whose jobs run on the event loop thread.
actor LoopBound {
    nonisolated let loop: EventLoop
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }
    var hits = 0
    init(loop: EventLoop) { self.loop = loop }
    func touch() -> Bool {
        hits += 1
        return loop.inLoop
    }
}

@Suite("Event loop")
struct EventLoopTests {
    @Test("work from many threads runs on the loop thread, in order per submitter")
    func executeFromThreads() async throws {
        let loop = EventLoop()
        defer { loop.shutdown() }
        let seen = Shared<[Int: [Int]]>([:])
        let onLoop = Shared<Int>(0)
        await withTaskGroup(of: Void.self) { group in
            for submitter in 0..<4 {
                group.addTask {
                    for n in 0..<1000 {
                        loop.execute {
                            if loop.inLoop { onLoop.withLock { $0 += 1 } }
                            seen.withLock { $0[submitter, default: []].append(n) }
                        }
                    }
                }
            }
        }
        _ = try await loop.submit { 0 }
        #expect(onLoop.withLock { $0 } == 4000)
        seen.withLock { dict in
            for submitter in 0..<4 { #expect(dict[submitter] == Array(0..<1000)) }
        }
    }

    @Test("an actor with the loop as executor runs its methods on the loop thread")
    func actorRunsOnLoop() async {
        let loop = EventLoop()
        defer { loop.shutdown() }
        let bound = LoopBound(loop: loop)
        var all = true
        for _ in 0..<100 { all = await bound.touch() && all }
        #expect(all)
        #expect(await bound.hits == 100)
        #expect(!loop.inLoop)
    }

    @Test("a readable file descriptor wakes the loop and reaches its handler")
    func watchFiresOnData() async throws {
        let loop = EventLoop()
        defer { loop.shutdown() }
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]); close(fds[1]) }
        let readFD = fds[0]
        let received = try await withCheckedThrowingContinuation {
            (continuation: CheckedContinuation<[UInt8], Error>) in
            loop.execute {
                var token: EventLoop.Token?
                token = loop.addWatch(fd: readFD, events: .readable) { events in
                    var buffer = [UInt8](repeating: 0, count: 16)
                    let count = read(readFD, &buffer, 16)
                    loop.removeWatch(token!)
                    continuation.resume(returning: Array(buffer.prefix(max(0, count))))
                    _ = events
                }
            }
            var bytes: [UInt8] = [1, 2, 3]
            _ = write(fds[1], &bytes, 3)
        }
        #expect(received == [1, 2, 3])
    }

    @Test("a descriptor closed while watched is reported once as an error and hang-up, not spun on")
    func closedDescriptorIsReportedAsError() async throws {
        let loop = EventLoop()
        defer { loop.shutdown() }
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { close(fds[1]) }
        // Watched at a number far above those in use: once closed, a descriptor another test
        // opens meanwhile (new ones take the lowest free number) cannot take its place, which
        // made the loop see a live descriptor instead of a closed one (CI).
        let readFD = fcntl(fds[0], F_DUPFD_CLOEXEC, 900)
        close(fds[0])
        #expect(readFD >= 900)
        let calls = Mutex<[EventLoop.IOEvents]>([])
        try await loop.submit {
            var token: EventLoop.Token?
            token = loop.addWatch(fd: readFD, events: .readable) { events in
                calls.withLock { $0.append(events) }
                loop.removeWatch(token!)  // what an owner does on an error
            }
            close(readFD)  // closed behind the loop's back
        }
        for _ in 0..<500 where calls.withLock({ $0.isEmpty }) { try await Task.sleep(for: .milliseconds(10)) }
        try await Task.sleep(for: .milliseconds(50))
        let seen = calls.withLock { $0 }
        #expect(seen.count == 1)
        #expect(seen.first?.contains(.error) == true && seen.first?.contains(.hangup) == true)
    }

    @Test("timers fire in deadline order and a cancelled timer never fires")
    func timersOrderAndCancel() async throws {
        let loop = EventLoop()
        defer { loop.shutdown() }
        let fired = Shared<[String]>([])
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
            loop.execute {
                _ = loop.addTimer(after: 0.03) { fired.withLock { $0.append("30ms") } }
                let cancelled = loop.addTimer(after: 0.02) { fired.withLock { $0.append("cancelled") } }
                _ = loop.addTimer(after: 0.01) { fired.withLock { $0.append("10ms") } }
                _ = loop.addTimer(after: 0.05) { continuation.resume() }
                loop.cancelTimer(cancelled)
            }
        }
        #expect(fired.withLock { $0 } == ["10ms", "30ms"])
    }

    @Test(
        "a timer interval from outside that does not fit in nanoseconds (1e300 s, infinity) never fires; NaN or negative fires at once"
    )
    func outOfRangeTimerIntervals() async throws {
        let loop = EventLoop()
        defer { loop.shutdown() }
        let fired = Shared<[String]>([])
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
            loop.execute {
                _ = loop.addTimer(after: 1e300) { fired.withLock { $0.append("1e300") } }
                _ = loop.addTimer(after: .infinity) { fired.withLock { $0.append("infinity") } }
                _ = loop.addTimer(after: .nan) { fired.withLock { $0.append("nan") } }
                _ = loop.addTimer(after: -5) { fired.withLock { $0.append("negative") } }
                _ = loop.addTimer(after: 0.05) { continuation.resume() }
            }
        }
        #expect(fired.withLock { $0 }.sorted() == ["nan", "negative"])
    }

    @Test("prepare hooks run before every poll")
    func prepareHooksRun() async throws {
        let loop = EventLoop()
        defer { loop.shutdown() }
        let count = Shared<Int>(0)
        _ = try await loop.submit { _ = loop.addPrepareHook { count.withLock { $0 += 1 } } }
        for _ in 0..<5 { _ = try await loop.submit { 0 } }
        #expect(count.withLock { $0 } >= 5)
    }

    @Test("a prepare hook added with last runs after the others, those added after it included")
    func lastPrepareHooks() async throws {
        let loop = EventLoop()
        defer { loop.shutdown() }
        let order = Shared<[String]>([])
        let tokens = try await loop.submit {
            let early = loop.addPrepareHook { order.withLock { $0.append("first") } }
            let last = loop.addPrepareHook(last: true) { order.withLock { $0.append("last") } }
            let later = loop.addPrepareHook { order.withLock { $0.append("second") } }
            return [early, last, later]
        }
        _ = try await loop.submit { 0 }
        try await loop.submit {
            order.withLock { $0 = [] }
            loop.execute {}  // one more turn, with every hook registered
        }
        _ = try await loop.submit { 0 }
        let turn = order.withLock { Array($0.prefix(3)) }
        #expect(turn == ["first", "second", "last"])
        try await loop.submit { for token in tokens { loop.removePrepareHook(token) } }
        order.withLock { $0 = [] }
        _ = try await loop.submit { 0 }
        _ = try await loop.submit { 0 }
        #expect(order.withLock { $0 }.isEmpty)
    }

    @Test("shutdown runs work already queued")
    func shutdownDrains() {
        let loop = EventLoop()
        let ran = Shared<Int>(0)
        for _ in 0..<100 { loop.execute { ran.withLock { $0 += 1 } } }
        loop.shutdown()
        #expect(ran.withLock { $0 } == 100)
    }
}

@Suite("Event loop as task executor")
struct LoopTaskExecutorTests {
    /// A continuation resumed from another thread.
    final class Parked: Sendable {
        let waiting = Mutex<CheckedContinuation<Void, Never>?>(nil)
        func park() async { await withCheckedContinuation { continuation in waiting.withLock { $0 = continuation } } }
        func release() -> Bool {
            guard let continuation = waiting.withLock({ $0.take() }) else { return false }
            continuation.resume()
            return true
        }
    }

    @Test(
        "a task preferring the loop runs on it, also after a continuation resumed from another thread; settle waits for it"
    )
    func preferenceAndSettle() async throws {
        let loop = EventLoop()
        defer { loop.shutdown() }
        let parked = Parked()
        let threads = Shared<[Bool]>([])
        let task = Task(executorPreference: loop.taskExecutor) {
            threads.withLock { $0.append(loop.inLoop) }
            await parked.park()
            threads.withLock { $0.append(loop.inLoop) }
            for _ in 0..<50 { await Task.yield() }
            threads.withLock { $0.append(loop.inLoop) }
        }
        await loop.settle()
        #expect(threads.withLock { $0 } == [true])
        #expect(parked.release())
        await loop.settle()
        #expect(threads.withLock { $0 } == [true, true, true], "resumed on the loop, and settle waited for the yields")
        await task.value
    }
}

extension LoopTaskExecutorTests {
    @Test("children of a task group in a loop-preferring task are settled too")
    func groupChildren() async throws {
        let loop = EventLoop()
        defer { loop.shutdown() }
        let marks = Shared<[String]>([])
        let gate = LoopTaskExecutorTests.Parked()
        let task = Task(executorPreference: loop.taskExecutor) {
            await gate.park()
            marks.withLock { $0.append("resumed \(loop.inLoop)") }
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    marks.withLock { $0.append("child \(loop.inLoop)") }
                    for _ in 0..<20 { await Task.yield() }
                    marks.withLock { $0.append("child done \(loop.inLoop)") }
                }
            }
            marks.withLock { $0.append("done") }
        }
        await loop.settle()
        #expect(gate.release())
        await loop.settle()
        #expect(marks.withLock { $0 } == ["resumed true", "child true", "child done true", "done"])
        await task.value
    }
}
