import Foundation
import Gateway
import GatewayRuntime
import TestSupport
import Testing

@Suite("ServiceGroup: start in order, stop in reverse within the deadline, one exit code")
struct ServiceGroupTests {
    /// A group of `stages` with no backstop (no SIGALRM in a test process). The default limits are
    /// generous: a stage that is cut off stops the next one early and changes the order a test
    /// checks, and a loaded `make test` can hold a stage for seconds; the test of the cut-off
    /// gives short ones.
    static func group(
        _ stages: [ServiceGroup.Stage], _ journal: Journal, termination: OneShot<String> = OneShot(),
        waitLimit: Double = 20, closeLimit: Double = 10, slack: Double = 5
    ) -> ServiceGroup {
        ServiceGroup(
            stages, termination: termination, log: journal.logger, slack: slack,
            beginStop: { StopDeadline(waitLimit: waitLimit, closeLimit: closeLimit) })
    }

    @Test(
        "services start in the order of the stages; at the signal the stages stop in reverse, each service's run ends after its stop, exit 0"
    )
    func order() async throws {
        let journal = Journal()
        let termination = OneShot<String>()
        let (a, b, c, d) = (
            FakeService("a", journal), FakeService("b", journal), FakeService("c", journal), FakeService("d", journal)
        )
        let group = Self.group(
            [.init([a, b], window: .close), .init([c], window: .wait), .init([d], window: .wait)], journal,
            termination: termination)
        async let code = group.run()
        try await eventually("every service runs", within: 30) { journal.index(of: "run d") != nil }
        #expect(journal.all.filter { $0.hasPrefix("start") } == ["start a", "start b", "start c", "start d"])
        #expect(!journal.all.contains { $0.hasPrefix("stop") })
        termination.set("SIGTERM")
        #expect(await code == .success)
        let all = journal.all
        let stops = all.filter { $0.hasPrefix("stop ") }
        #expect(stops.prefix(2) == ["stop d", "stop c"], "\(all)")
        #expect(Set(stops.dropFirst(2)) == ["stop a", "stop b"], "\(all)")
        // A stage is over once its services' runs ended: c's run ends before a and b stop.
        let runCEnded = try #require(journal.index(of: "run c ended"))
        #expect(runCEnded > journal.index(of: "stop c")!)
        #expect(runCEnded < journal.index(of: "stop a")! && runCEnded < journal.index(of: "stop b")!)
        #expect(all.contains("<5>SIGTERM: stopping"))
        // (How long it took is the machine's: a loaded one makes it seconds.)
        #expect(all.last?.hasPrefix("<5>stopped in ") == true, "\(all)")
    }

    @Test(
        "a start that fails: the later services never start, the failing one and those before it are stopped in reverse, and the error decides the exit code",
        arguments: [
            (RunFailure("bad url", isConfiguration: true) as any Error, ExitCode.config),
            (GatewayStartError("advertisement too large", isConfiguration: true), .config),
            (GatewayStartError("scan failed"), .failure),
            (Failed(), .failure),
        ] as [(any Error, ExitCode)])
    func failingStart(error: any Error, expected: ExitCode) async throws {
        let journal = Journal()
        let group = Self.group(
            [
                .init([FakeService("a", journal), FakeService("b", journal)], window: .close),
                .init([FakeService("c", journal, startError: error)], window: .wait),
                .init([FakeService("d", journal)], window: .wait),
            ], journal)
        let code = try await within(60, "the group to end") { await group.run() }
        #expect(code == expected)
        let all = journal.all
        #expect(!all.contains("start d"))
        #expect(all.filter { $0.hasPrefix("stop ") }.first == "stop c", "\(all)")
        #expect(Set(all.filter { $0.hasPrefix("stop ") }.dropFirst()) == ["stop a", "stop b"], "\(all)")
        #expect(all.contains("<3>c: \(error)"), "\(all)")
        #expect(!all.contains("run c"), "a service whose start failed does not run")
    }

    @Test(
        "a run that throws ends the group: everything stops in reverse, exit 1, the error logged with the service's name"
    )
    func failingRun() async throws {
        let journal = Journal()
        let group = Self.group(
            [
                .init([FakeService("a", journal)], window: .close),
                .init([FakeService("b", journal, runError: Failed())], window: .wait),
            ],
            journal)
        let code = try await within(60, "the group to end") { await group.run() }
        #expect(code == .failure)
        #expect(journal.all.contains("<3>b: it failed"))
        #expect(journal.all.filter { $0.hasPrefix("stop ") } == ["stop b", "stop a"])
    }

    @Test(
        "a stop that ignores cancellation is cut off at the end of its stage's window and logged; the stages after it stop without waiting for it"
    )
    func stubbornStop() async throws {
        let journal = Journal()
        let termination = OneShot<String>()
        let group = Self.group(
            [
                .init([FakeService("mqtt", journal)], window: .close),
                .init([FakeService("core", journal, stubbornStop: 20)], window: .wait),
            ], journal, termination: termination, waitLimit: 0.3, closeLimit: 0.1, slack: 0.1)
        async let code = group.run()
        try await eventually("both run", within: 30) { journal.index(of: "run core") != nil }
        termination.set("SIGINT")
        #expect(await code == .success)
        let all = journal.all
        let cut = try #require(all.first { $0.hasPrefix("<4>stop: core did not stop within ") }, "\(all)")
        #expect(cut.hasSuffix("cancelled, the stop goes on without it"))
        // Cut at the window (0.3 s) plus the slack (0.1 s) after the stop began.
        let stopBegan = try #require(journal.time(of: "stop core"))
        let mqttStopped = try #require(journal.time(of: "stop mqtt"))
        // (The upper bound is far below the stubborn stop's 20 s, far above what a stalled test run adds.)
        #expect(mqttStopped - stopBegan > 0.35 && mqttStopped - stopBegan < 15, "\(mqttStopped - stopBegan) s")
        // The next stage stopped long before the stubborn stop ended (the group waits for it at the end).
        #expect(journal.index(of: "stop mqtt")! < journal.index(of: "stop core ended")!)
        let stopped = try #require(all.firstIndex { $0.hasPrefix("<5>stopped in ") }, "\(all)")
        #expect(stopped < journal.index(of: "stop core ended")!, "the last line is logged before the straggler ends")
    }

    @Test("the termination signal during a start cancels it; what started is stopped in reverse, exit 0")
    func signalDuringStart() async throws {
        let journal = Journal()
        let termination = OneShot<String>()
        let group = Self.group(
            [
                .init([FakeService("a", journal), FakeService("b", journal, startWaits: true)], window: .close),
                .init([FakeService("c", journal)], window: .wait),
            ], journal, termination: termination)
        async let code = group.run()
        try await eventually("b's start is under way", within: 30) { journal.index(of: "start b") != nil }
        termination.set("SIGTERM")
        #expect(await code == .success)
        let all = journal.all
        #expect(!all.contains("start c"))
        #expect(Set(all.filter { $0.hasPrefix("stop ") }) == ["stop a", "stop b"], "\(all)")
        #expect(all.contains("<5>SIGTERM: stopping"))
    }

    @Test("without the signal the group keeps running: nothing stops")
    func keepsRunning() async throws {
        let journal = Journal()
        let termination = OneShot<String>()
        let group = Self.group([.init([FakeService("a", journal)], window: .wait)], journal, termination: termination)
        async let code = group.run()
        try await eventually("a runs", within: 30) { journal.index(of: "run a") != nil }
        try await Task.sleep(for: .milliseconds(500))
        #expect(journal.all == ["start a", "run a"])
        termination.set("SIGTERM")
        #expect(await code == .success)
        #expect(journal.all.contains("stop a"))
    }
}
