import EventLoop
import Synchronization
import TestSupport
import Testing

@testable import GatewayRuntime

#if canImport(Glibc)
    import Glibc
#endif

@Suite("The process's parts: the memory trimmer's timer, the termination signals")
struct ProcessPartsTests {
    @Test("the trimmer calls its trim on the loop thread again and again, not once")
    func trimmerRepeats() async throws {
        let loop = EventLoop(name: "trim-test")
        let calls = Mutex((count: 0, offLoop: 0))
        MemoryTrimmer.start(on: loop, every: 0.02) {
            let inLoop = loop.inLoop
            calls.withLock {
                $0.count += 1
                if !inLoop { $0.offLoop += 1 }
            }
        }
        try await eventually("three trims") { calls.withLock { $0.count } >= 3 }
        #expect(calls.withLock { $0.offLoop } == 0)
        loop.shutdown()
    }

    @Test("on glibc the trimmer finds malloc_trim, and a call of it returns 0 or 1 (memory released or not)")
    func mallocTrimFound() throws {
        #if canImport(Glibc)
            let trim = try #require(MemoryTrimmer.mallocTrim)
            #expect([0, 1].contains(trim(0)))
        #endif
    }

    // SIGUSR1 and SIGUSR2 stand in for SIGINT and SIGTERM: the same code, and a mistake cannot end
    // the test runner's process by a signal the harness itself might send.
    @Test("the first termination signal is the one reported; its default action no longer ends the process")
    func terminationSignal() async throws {
        let signals = [(number: SIGUSR1, name: "SIGUSR1"), (number: SIGUSR2, name: "SIGUSR2")]
        let received = SignalSources.termination(of: signals)
        #expect(received.value == nil)
        // The sources take effect on dispatch's own thread, a little after they are made; until
        // then the ignored signal is lost. Sent again, every half second, until it is seen
        // (SIGUSR2 only; seldom, since the other tests of this process run meanwhile).
        let name = try await within(defaultWait, "the signal's name") {
            while received.value == nil {
                kill(getpid(), SIGUSR2)
                try? await Task.sleep(for: .milliseconds(500))
            }
            return await received.wait()
        }
        #expect(name == "SIGUSR2")
        // A second signal changes nothing, and does not kill the process either.
        kill(getpid(), SIGUSR1)
        try await Task.sleep(for: .milliseconds(100))
        #expect(received.value == "SIGUSR2")
    }
}
