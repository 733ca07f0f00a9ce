import BlueZSimulator
import DBus
import EventLoop
import Foundation
import MQTT
import TestSupport
import Testing

/// Stopping `gattway run` (docs/operations.md, "Stopping"): SIGTERM ends it with status 0 within
/// 5 s whatever the broker and bluetoothd do, and every reading it accepted before the stop
/// reaches a persistent QoS 1 subscriber after the next start, in order — also those the broker
/// had not acknowledged when it went away, which lived only in the MQTT client's memory.
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
        /// SIGKILL, readings queue for a while, then SIGTERM to gattway.
        case killedBefore = "killed, then SIGTERM"
        /// SIGKILL right after SIGTERM to gattway, while it stops.
        case killedDuring = "killed during the stop"
        /// SIGSTOP: connected but acknowledging nothing; readings stay in flight. After gattway
        /// exited the frozen broker is killed (what it never read is gone) and started again.
        case frozen = "frozen (SIGSTOP)"
        var testDescription: String { rawValue }
    }

    @Test(
        "the broker fails around the stop: gattway exits 0 within 5 s, and every reading it accepted reaches the subscriber after the next start, in order, before the new ones",
        arguments: [BrokerFault.killedBefore, .killedDuring, .frozen])
    func broker(_ fault: BrokerFault) async throws {
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
                switch fault {
                case .killedBefore:
                    e2e.broker.kill()
                    _ = try await StoreAndForwardTests.waitForNotifications(e2e, count: 5)
                case .killedDuring:
                    break
                case .frozen:
                    e2e.broker.child?.signal(SIGSTOP)
                    _ = try await StoreAndForwardTests.waitForNotifications(e2e, count: 5)
                }
                let accepted = try await Self.freshNotification(e2e)
                let stoppedAt = Date().timeIntervalSince1970
                let (status, seconds) = try await Self.terminate(e2e.gateway) {
                    if fault == .killedDuring { e2e.broker.child?.signal(SIGKILL) }
                }
                let log = e2e.gateway.log()
                #expect(status == 0, "exit status \(status)")
                #expect(seconds <= Self.bound, "stopped in \(seconds) s")
                #expect(log.contains("<5>stopped in ") && !log.contains("stopping took longer"))
                if fault == .frozen {
                    // Everything captured during the freeze was in flight, unacknowledged.
                    let written = StoreAndForwardTests.count(
                        in: log, before: " messages the broker had not acknowledged",
                        after: "store-and-forward: wrote ")
                    #expect((written ?? 0) >= 5, "\(log.split(separator: "\n").suffix(12).joined(separator: "\n"))")
                }
                e2e.broker.kill()

                // The next start: the broker is back, a new gateway on the same state directory.
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
                Self.expectEveryAcceptedReading(
                    StoreAndForwardTests.readings(recorder), accepted: accepted, stoppedAt: stoppedAt,
                    restartedAt: restartedAt)
            }
        }
    }

    @Test("bluetoothd gone (the simulator crashed) before SIGTERM: gattway exits 0 within 5 s")
    func bluetoothdGone() async throws {
        try await EndToEnd.run(config: StoreAndForwardTests.config()) { e2e in
            try await e2e.gateway.waitForOutput(containing: "battery_sensor: connected", timeout: 30)
            await e2e.simulator.crash()
            try await e2e.gateway.waitForOutput(containing: "bluetoothd left the bus", timeout: 10)
            let (status, seconds) = try await Self.terminate(e2e.gateway)
            #expect(status == 0, "exit status \(status)")
            #expect(seconds <= Self.bound, "stopped in \(seconds) s")
        }
    }

    @Test(
        "bluetoothd frozen (SIGSTOP) with a link up: the Disconnect and closing calls are cancelled at the deadline, gattway exits 0 within 5 s"
    )
    func bluetoothdFrozen() async throws {
        let bluetoothd = ProcessHolder()
        defer { bluetoothd.process?.kill9() }
        try await EndToEnd.run(
            config: StoreAndForwardTests.config(),
            beforeGateway: { bus, loop in
                bluetoothd.process = try await Self.bluetoothdProcess(bus: bus, loop: loop)
            }
        ) { e2e in
            try await e2e.gateway.waitForOutput(containing: "battery_sensor: connected", timeout: 30)
            let simulator = try #require(bluetoothd.process)
            simulator.signal(SIGSTOP)
            let (status, seconds) = try await Self.terminate(e2e.gateway)
            #expect(status == 0, "exit status \(status)")
            #expect(seconds <= Self.bound, "stopped in \(seconds) s")
            let log = e2e.gateway.log()
            #expect(
                log.contains("1 link: Disconnect not answered within 3.0 s, cancelled (left to BlueZ)"),
                "\(log.split(separator: "\n").suffix(12).joined(separator: "\n"))")
            simulator.kill9()
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

    /// Sends SIGTERM (then runs `meanwhile`) and waits for the exit: its status and the seconds
    /// from the signal to the exit. A gattway still running 20 s after the signal (a stop that
    /// does not end) is killed (status 137) so the test goes on to fail instead of hanging.
    static func terminate(_ gateway: ChildProcess, meanwhile: () -> Void = {}) async throws -> (
        status: Int32, seconds: Double
    ) {
        let start = MessageRecorder.now()
        gateway.signal(SIGTERM)
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

    /// The readings without repeats of one reading (same value and `last_seen`): MQTT's QoS 1
    /// redeliveries, and a message the broker received without acknowledging it, replayed by the
    /// next start (at least once).
    static func distinct(_ readings: [Reading]) -> [Reading] {
        var seen: Set<String> = []
        return readings.filter { seen.insert("\($0.value) \($0.lastSeen ?? -1)").inserted }
    }

    /// Every reading captured before the stop arrived once or more, in order, without a gap up to
    /// `accepted` (the last notification before SIGTERM); those that arrived after the restart
    /// came before every reading of the next gattway; the next gattway's readings follow on.
    static func expectEveryAcceptedReading(
        _ all: [Reading], accepted: Int, stoppedAt: Double, restartedAt: Double,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let readings = distinct(all)
        let old = readings.filter { ($0.lastSeen ?? .infinity) < stoppedAt }
        let new = readings.filter { ($0.lastSeen ?? 0) > restartedAt }
        StoreAndForwardTests.expectChain(old, sourceLocation: sourceLocation)
        #expect(
            old.contains { $0.value == accepted }, "the last reading before SIGTERM (\(accepted)) is missing: \(all)",
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

    /// `gattway simulate` on the test's bus in place of the in-process simulator (crashed
    /// first, so the child takes org.bluez), so that it can be frozen with SIGSTOP.
    static func bluetoothdProcess(bus: String, loop: EventLoop) async throws -> ChildProcess {
        let connection = try await DBusConnection.connect(to: .address(bus), on: loop)
        _ = try await connection.call(
            destination: "org.bluez", path: "/io/gattway/Simulator", interface: "io.gattway.Simulator1",
            method: "Crash", arguments: [.double(-1)])
        let process = try ChildProcess(
            try BuiltProduct.path("gattway"), ["simulate", "--scenario", "demo", "--bus-address", bus, "--quiet"])
        let deadline = MessageRecorder.now() + 30
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

/// The child bluetoothd of a test, set up before the gateway starts.
final class ProcessHolder: @unchecked Sendable {
    // Invariant for @unchecked Sendable: set once in beforeGateway, read after it returned.
    var process: ChildProcess?
}
