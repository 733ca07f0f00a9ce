import BlueZSimulator
import DBus
import EventLoop
import Foundation
import MQTT
import TestSupport
import Testing

/// Stopping `gattway run` (docs/operations.md, "Stopping"): SIGTERM or SIGINT ends it with status
/// 0 within 5 s whatever the broker and bluetoothd do, and every reading it accepted before the
/// stop reaches a persistent QoS 1 subscriber after the next start, in order — also those the
/// broker had not acknowledged when it went away, which lived only in the MQTT client's memory.
///
/// The battery sensor of the demo world counts down by one per notification (every 200 ms), so a
/// lost reading shows as a gap in the values (helpers from ``StoreAndForwardTests``).
@Suite("End to end: stopping")
struct StopTests {
    typealias Reading = StoreAndForwardTests.Reading

    /// From the signal to the exit, at most (docs/operations.md, "Stopping").
    static let bound = 5.0

    /// How the broker fails around the stop.
    enum BrokerFault: String, CustomTestStringConvertible, Sendable {
        /// SIGKILL, readings queue for a while, then the signal to gattway.
        case killedBefore = "killed before the stop"
        /// SIGSTOP a moment before the signal, so that readings are in flight (handed to the
        /// MQTT client, not acknowledged), then SIGKILL right after the signal, while gattway
        /// stops: the connection drops during the wait for `bridge/state` offline.
        case killedDuring = "killed during the stop"
        /// SIGSTOP: connected but acknowledging nothing; readings stay in flight. After gattway
        /// exited the frozen broker is killed (what it never read is gone) and started again.
        case frozen = "frozen (SIGSTOP)"
        var testDescription: String { rawValue }
    }

    /// The signal that stops gattway.
    enum StopSignal: String, CustomTestStringConvertible, Sendable {
        case sigterm = "SIGTERM"
        case sigint = "SIGINT"
        var number: Int32 { self == .sigterm ? SIGTERM : SIGINT }
        var testDescription: String { rawValue }
    }

    @Test(
        "the broker fails around the stop: gattway exits 0 within 5 s, and every reading it accepted reaches the subscriber after the next start, in order, before the new ones",
        arguments: [
            (BrokerFault.killedBefore, StopSignal.sigterm), (.killedBefore, .sigint), (.killedDuring, .sigterm),
            (.frozen, .sigterm),
        ])
    func broker(_ fault: BrokerFault, _ signal: StopSignal) async throws {
        let state = try TemporaryDirectory.make(prefix: "stop-state")
        defer { try? FileManager.default.removeItem(at: state) }
        // BlueZ's own 2 s Disconnect: the stop lasts that long, so the broker can fail during it.
        let scenario = try EndToEnd.fastDemo { $0.timing.disconnectDelay = 2 }
        try await EndToEnd.run(
            config: StoreAndForwardTests.config(stateDirectory: state.path), scenario: scenario,
            broker: StoreAndForwardTests.persistentBroker
        ) { e2e in
            try await StoreAndForwardTests.withSubscriber(e2e) { recorder in
                try await StoreAndForwardTests.waitForReadings(recorder, count: 3, after: 0)
                // Readings captured while the broker is away or frozen: each must arrive after
                // the next start, none before it.
                let held: Int
                switch fault {
                case .killedBefore:
                    e2e.broker.kill()
                    held = try await StoreAndForwardTests.waitForNotifications(e2e, count: 5)
                case .killedDuring:
                    e2e.broker.child?.signal(SIGSTOP)
                    held = try await StoreAndForwardTests.waitForNotifications(e2e, count: 3)
                case .frozen:
                    e2e.broker.child?.signal(SIGSTOP)
                    held = try await StoreAndForwardTests.waitForNotifications(e2e, count: 5)
                }
                let accepted = try await Self.freshNotification(e2e)
                let stoppedAt = Date().timeIntervalSince1970
                let (status, seconds) = try await Self.stop(e2e.gateway, with: signal.number) {
                    if fault == .killedDuring { e2e.broker.child?.signal(SIGKILL) }
                }
                let log = e2e.gateway.log()
                #expect(status == 0, "exit status \(status)")
                #expect(seconds <= Self.bound, "stopped in \(seconds) s")
                #expect(log.contains("\(signal.rawValue): stopping"), "\(Self.tail(log))")
                #expect(log.contains("<5>stopped in ") && !log.contains("stopping took longer"))
                if fault == .frozen {
                    // Everything captured during the freeze was in flight, unacknowledged.
                    let written = StoreAndForwardTests.count(
                        in: log, before: " messages the broker had not acknowledged",
                        after: "store-and-forward: wrote ")
                    #expect((written ?? 0) >= 5, "\(Self.tail(log))")
                }
                e2e.broker.kill()
                try await Self.expectReplayAtNextStart(
                    e2e, recorder, accepted: accepted, held: held, stoppedAt: stoppedAt)
            }
        }
    }

    @Test(
        "bluetoothd gone (the simulator crashed) during a broker outage, then SIGTERM: gattway exits 0 within 5 s, and every reading it accepted reaches the subscriber after the next start, in order"
    )
    func bluetoothdGone() async throws {
        let state = try TemporaryDirectory.make(prefix: "stop-state")
        defer { try? FileManager.default.removeItem(at: state) }
        try await EndToEnd.run(
            config: StoreAndForwardTests.config(stateDirectory: state.path),
            broker: StoreAndForwardTests.persistentBroker
        ) { e2e in
            try await StoreAndForwardTests.withSubscriber(e2e) { recorder in
                try await StoreAndForwardTests.waitForReadings(recorder, count: 3, after: 0)
                e2e.broker.kill()
                let held = try await StoreAndForwardTests.waitForNotifications(e2e, count: 5)
                let accepted = try await Self.freshNotification(e2e)
                await e2e.simulator.crash()
                try await e2e.gateway.waitForOutput(containing: "bluetoothd left the bus", timeout: 10)
                let stoppedAt = Date().timeIntervalSince1970
                let (status, seconds) = try await Self.stop(e2e.gateway, with: SIGTERM)
                #expect(status == 0, "exit status \(status)")
                #expect(seconds <= Self.bound, "stopped in \(seconds) s")
                // bluetoothd back (a fresh object tree; the sensor's counter starts again).
                try await e2e.simulator.restart()
                try await Self.expectReplayAtNextStart(
                    e2e, recorder, accepted: accepted, held: held, stoppedAt: stoppedAt)
            }
        }
    }

    @Test(
        "bluetoothd frozen (SIGSTOP) with a link up during a broker outage: the Disconnect and closing calls are cancelled at the deadline, gattway exits 0 within 5 s, and every reading it accepted reaches the subscriber after the next start, in order"
    )
    func bluetoothdFrozen() async throws {
        let state = try TemporaryDirectory.make(prefix: "stop-state")
        defer { try? FileManager.default.removeItem(at: state) }
        let scenario = try Self.fastDemoFile()
        defer { try? FileManager.default.removeItem(at: scenario.deletingLastPathComponent()) }
        let bluetoothd = ProcessHolder()
        defer { bluetoothd.process?.kill9() }
        try await EndToEnd.run(
            config: StoreAndForwardTests.config(stateDirectory: state.path),
            broker: StoreAndForwardTests.persistentBroker,
            beforeGateway: { bus, loop in
                bluetoothd.process = try await Self.bluetoothdProcess(bus: bus, loop: loop, scenario: scenario.path)
            }
        ) { e2e in
            try await StoreAndForwardTests.withSubscriber(e2e) { recorder in
                try await StoreAndForwardTests.waitForReadings(recorder, count: 3, after: 0)
                e2e.broker.kill()
                // The simulator is a child process here: its notifications show in the queue file.
                let accepted = try await Self.waitForStored(
                    count: 5, in: state.appendingPathComponent("outbox.log").path)
                let simulator = try #require(bluetoothd.process)
                simulator.signal(SIGSTOP)
                let stoppedAt = Date().timeIntervalSince1970
                let (status, seconds) = try await Self.stop(e2e.gateway, with: SIGTERM)
                #expect(status == 0, "exit status \(status)")
                #expect(seconds <= Self.bound, "stopped in \(seconds) s")
                let log = e2e.gateway.log()
                #expect(
                    log.contains("1 link: Disconnect not answered within 3.0 s, cancelled (left to BlueZ)"),
                    "\(Self.tail(log))")
                simulator.kill9()
                bluetoothd.process = try await Self.bluetoothdProcess(
                    bus: e2e.daemon.address, loop: e2e.loop, scenario: scenario.path)
                try await Self.expectReplayAtNextStart(
                    e2e, recorder, accepted: accepted, held: 5, stoppedAt: stoppedAt)
            }
        }
    }

    @Test(
        "SIGHUP does not stop gattway run (there is no live reload; docs/raspberry-pi.md): it keeps running and publishing readings"
    )
    func sighupIgnored() async throws {
        try await EndToEnd.run(config: StoreAndForwardTests.config()) { e2e in
            let topic = StoreAndForwardTests.topic
            try await e2e.messages.next(on: topic) { $0.number("battery") != nil }
            e2e.gateway.signal(SIGHUP)
            let mark = e2e.messages.count
            // Notifications come every 0.2 s: the second one after the signal comes well after
            // SIGHUP's default action (ending the process) would have taken effect.
            try await e2e.messages.wait(for: "two readings after SIGHUP", count: 2, after: mark, timeout: 30) {
                $0.topic == topic && $0.number("battery") != nil
            }
            #expect(e2e.gateway.isRunning, "\(e2e.gateway.log())")
            #expect(!e2e.gateway.log().contains("stopping"), "\(e2e.gateway.log())")
            #expect(
                !e2e.messages.all.dropFirst(mark).contains {
                    $0.topic == "gattway/bridge/state" && $0.text.contains("offline")
                })
        }
    }

    // MARK: Helpers

    /// Sends `signal` (SIGTERM or SIGINT; then runs `meanwhile`) and waits for the exit: its
    /// status and the seconds from the signal to the exit. A gattway still running 20 s after the
    /// signal (a stop that does not end) is killed (status 137) so the test goes on to fail
    /// instead of hanging.
    static func stop(_ gateway: ChildProcess, with signal: Int32, meanwhile: () -> Void = {}) async throws -> (
        status: Int32, seconds: Double
    ) {
        let start = MessageRecorder.now()
        gateway.signal(signal)
        meanwhile()
        while gateway.isRunning, MessageRecorder.now() - start < 20 {
            try await Task.sleep(nanoseconds: 5_000_000)
        }
        let seconds = MessageRecorder.now() - start
        if gateway.isRunning { gateway.kill9() }
        return (gateway.terminationStatus, seconds)
    }

    /// Waits for the sensor's next notification and half an interval more (the gateway has
    /// read it; the next one is ~100 ms away); returns the value it carried.
    static func freshNotification(_ e2e: EndToEnd) async throws -> Int {
        let before = await e2e.simulator.currentCounters.notifications
        var now = before
        let deadline = MessageRecorder.now() + 10
        while now == before {
            guard MessageRecorder.now() < deadline else {
                throw RecorderTimeout(description: "no notification within 10 s")
            }
            try await Task.sleep(nanoseconds: 1_000_000)
            now = await e2e.simulator.currentCounters.notifications
        }
        try await Task.sleep(nanoseconds: 100_000_000)
        return StoreAndForwardTests.value(ofNotification: now)
    }

    /// The next start: the broker back, a new gateway on the same state directory. Waits for
    /// three readings it captured, then checks what the subscriber got
    /// (``expectEveryAcceptedReading(_:accepted:held:stoppedAt:restartedAt:sourceLocation:)``).
    static func expectReplayAtNextStart(
        _ e2e: EndToEnd, _ recorder: MessageRecorder, accepted: Int, held: Int, stoppedAt: Double,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        try await e2e.broker.start()
        let restartedAt = Date().timeIntervalSince1970
        let second = try e2e.startGateway()
        defer { second.stop(grace: 5) }
        do {
            try await recorder.wait(for: "readings captured by the next gattway", count: 3, timeout: 40) {
                ($0.number("battery") != nil)
                    && ($0.string("last_seen").flatMap(StoreAndForwardTests.seconds) ?? 0) > restartedAt
            }
        } catch {
            throw EndToEndFailure(error: error, gatewayLog: second.log())
        }
        expectEveryAcceptedReading(
            StoreAndForwardTests.readings(recorder), accepted: accepted, held: held, stoppedAt: stoppedAt,
            restartedAt: restartedAt, sourceLocation: sourceLocation)
    }

    /// The readings without repeats of one reading (same value and `last_seen`): MQTT's QoS 1
    /// redeliveries, and a message the broker received without acknowledging it, replayed by the
    /// next start (at least once).
    static func distinct(_ readings: [Reading]) -> [Reading] {
        var seen: Set<String> = []
        return readings.filter { seen.insert("\($0.value) \($0.lastSeen ?? -1)").inserted }
    }

    /// Every reading captured before the stop arrived once or more, in order, without a gap up to
    /// `accepted` (the last notification before the signal); at least `held` of them (those
    /// captured while the broker was away or frozen) arrived first after the restart, so the
    /// queue was replayed; those that arrived after the restart came before every reading of the
    /// next gattway; the next gattway's readings follow on.
    static func expectEveryAcceptedReading(
        _ all: [Reading], accepted: Int, held: Int, stoppedAt: Double, restartedAt: Double,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let readings = distinct(all)
        let old = readings.filter { ($0.lastSeen ?? .infinity) < stoppedAt }
        let new = readings.filter { ($0.lastSeen ?? 0) > restartedAt }
        StoreAndForwardTests.expectChain(old, sourceLocation: sourceLocation)
        #expect(
            old.contains { $0.value == accepted }, "the last reading before the stop (\(accepted)) is missing: \(all)",
            sourceLocation: sourceLocation)
        let replayed = old.filter { $0.arrival >= restartedAt }
        #expect(
            replayed.count >= held,
            "\(replayed.count) readings from before the stop arrived after the next start, \(held) were held: \(all)",
            sourceLocation: sourceLocation)
        StoreAndForwardTests.expectChain(new, sourceLocation: sourceLocation)
        #expect(new.count >= 3, sourceLocation: sourceLocation)
        let arrivedAfter = all.filter { $0.arrival >= restartedAt }
        if let firstNew = arrivedAfter.firstIndex(where: { ($0.lastSeen ?? 0) > restartedAt }) {
            let late = arrivedAfter[firstNew...].filter { ($0.lastSeen ?? .infinity) < stoppedAt }
            #expect(
                late.isEmpty, "readings from before the stop arrived after the next gattway's: \(late) in \(all)",
                sourceLocation: sourceLocation)
        }
    }

    /// `gattway simulate --scenario FILE` on the test's bus in place of the in-process simulator
    /// (crashed first) or of a killed child, so that it can be frozen with SIGSTOP: started once
    /// `org.bluez` has no owner.
    static func bluetoothdProcess(bus: String, loop: EventLoop, scenario: String) async throws -> ChildProcess {
        let connection = try await DBusConnection.connect(to: .address(bus), on: loop)
        _ = try? await connection.call(
            destination: "org.bluez", path: "/io/gattway/Simulator", interface: "io.gattway.Simulator1",
            method: "Crash", arguments: [.double(-1)])
        let deadline = MessageRecorder.now() + 30
        while (try? await connection.nameOwner("org.bluez")) ?? nil != nil {
            guard MessageRecorder.now() < deadline else {
                await connection.close()
                throw ChildProcessError("org.bluez still owned 30 s after its owner crashed or was killed")
            }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        let process = try ChildProcess(
            try BuiltProduct.path("gattway"), ["simulate", "--scenario", scenario, "--bus-address", bus, "--quiet"])
        while true {
            if let owner = try? await connection.nameOwner("org.bluez"), !owner.isEmpty,
                (try? await connection.call(
                    destination: "org.bluez", path: "/org/bluez/hci0", interface: "org.freedesktop.DBus.Peer",
                    method: "Ping")) != nil
            {
                break
            }
            guard MessageRecorder.now() < deadline, process.isRunning else {
                await connection.close()
                throw ChildProcessError("gattway simulate did not take org.bluez within 30 s:\n\(process.log())")
            }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        await connection.close()
        return process
    }
}

extension StopTests {
    /// The demo world at the pace of ``EndToEnd/fastDemo(_:)`` for a child `gattway simulate`:
    /// advertising every 100 ms, the battery sensor notifying every 200 ms (BlueZ's own timing).
    /// A scenario file in a directory of its own.
    static func fastDemoFile() throws -> URL {
        let directory = try TemporaryDirectory.make(prefix: "stop-scenario")
        let file = directory.appendingPathComponent("scenario.json")
        let json = DemoScenario.json.replacingOccurrences(of: #""interval": "1s""#, with: #""interval": "100ms""#)
            .replacingOccurrences(of: #""every": "2s""#, with: #""every": "200ms""#)
        try json.write(to: file, atomically: true, encoding: .utf8)
        return file
    }

    /// Waits until the queue file stored `count` new battery readings (its last one changed that
    /// many times) and returns the last, right after it was stored: the next notification is
    /// about 200 ms away.
    static func waitForStored(count: Int, in queueFile: String, timeout: Double = 15) async throws -> Int {
        let deadline = MessageRecorder.now() + timeout
        var last = StoreAndForwardTests.lastStoredBattery(queueFile)
        var changes = 0
        while MessageRecorder.now() < deadline {
            let now = StoreAndForwardTests.lastStoredBattery(queueFile)
            if let now, now != last {
                changes += 1
                last = now
                if changes >= count { return now }
            }
            try await Task.sleep(nanoseconds: 1_000_000)
        }
        throw RecorderTimeout(description: "\(changes) of \(count) readings stored in \(queueFile) within \(timeout) s")
    }

    /// The last lines of a log, for a failure's message.
    static func tail(_ log: String) -> String {
        log.split(separator: "\n").suffix(12).joined(separator: "\n")
    }
}

/// The child bluetoothd of a test, set up before the gateway starts.
final class ProcessHolder: @unchecked Sendable {
    // Invariant for @unchecked Sendable: set once in beforeGateway, read after it returned.
    var process: ChildProcess?
}
