import EventLoop
import Foundation
import TestSupport

/// `gattway-bench soak` (`make soak MINUTES=30`; RELIABILITY.md): `gattway run` for MINUTES on
/// the simulator — the demo's connected devices, ``SoakScenario/advertisers`` rotating ATC1441
/// advertisers at 500 adv/s — with a fault every ``faultInterval`` seconds in turn
/// (``SoakFault``), a QoS 1 persistent subscriber accounting for every reading of the connected
/// sensors (``SensorAccount``), RSS sampled every 10 s, and at the end a report: alive, RSS growth
/// after the warm-up, readings lost, recovery per fault kind, CPU per message. Everything runs on
/// loopback and in private daemons, and it ends by itself; the exit status says whether every
/// target was met.
enum Soak {
    static let faultInterval = 20.0
    static let sampleInterval = 10.0
    /// RSS growth is measured from here (or from half the run, when shorter than 10 minutes).
    static let warmup = 300.0
    /// Before the first fault: the sensors connected and readings flowing.
    static let settle = 30.0

    static func monotonic() -> Double { Double(EventLoop.now()) / 1e9 }

    static func say(_ text: String) {
        FileHandle.standardError.write(Data("soak: \(text)\n".utf8))
    }

    /// Runs the soak; true when every target was met.
    static func run(minutes: Double) async throws -> Bool {
        let duration = minutes * 60
        let warmup = min(Self.warmup, duration / 2)
        let loadAtStart = loadAverage()
        say("\(minutes.formatted(1)) min, faults every \(Int(faultInterval)) s, load \(loadAtStart)")
        let broker = try await MosquittoBroker(persistent: true, extraConfig: ["autosave_interval 10"])
        defer { broker.stop() }
        let world = try await SimulatedWorld(scenario: SoakScenario.scenario())
        let sensors = [CounterSensor.battery, CounterSensor.environment]
        let recorder = try await SensorRecorder(brokerPort: broker.port, sensors: sensors)
        let gattway = try await GatewayProcess.gattway(
            config: SoakScenario.gatewayConfig(port: broker.port), world: world)
        let bluezDown = Locked(false)
        let rotation = AdvertiserRotation()
        try await rotation.start(world.simulator, paused: bluezDown)
        for sensor in sensors { sensor.start(world.simulator) }

        // Both sensors connected and publishing before the clock starts.
        let ready = monotonic() + 120
        while sensors.contains(where: { recorder.readings(of: $0).isEmpty }) {
            guard monotonic() < ready else {
                throw BenchError(
                    "the connected sensors did not publish within 120 s:\n\(gattway.child.log().suffix(3000))")
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        let start = monotonic()
        let end = start + duration
        say("sensors publishing; running until \(Int(duration)) s")
        let reportsAtStart = await world.simulator.counterValues().advertisementReports

        let samples = Locked<[(time: Double, sample: ProcessSample)]>([])
        let pid = gattway.child.pid
        let sampler = Task {
            while !Task.isCancelled {
                if let sample = ProcessSample.read(pid) { samples.value.withLock { $0.append((monotonic(), sample)) } }
                try? await Task.sleep(for: .seconds(sampleInterval))
            }
        }
        var faults: [SoakFault.Record] = []
        var nextFault = start + settle
        var nextNote = start + 60
        var failure: String?
        while monotonic() < end {
            if !gattway.child.isRunning {
                failure = "gattway exited (status \(gattway.child.terminationStatus))"
                break
            }
            let now = monotonic()
            if now >= nextFault, now < end - faultInterval {
                let kind = SoakFault.allCases[faults.count % SoakFault.allCases.count]
                do {
                    let record = try await kind.inject(world: world, broker: broker, bluezDown: bluezDown)
                    faults.append(record)
                    say(
                        "\(Int(record.started - start)) s: \(kind.rawValue) (\((record.ended - record.started).formatted(1)) s)"
                    )
                } catch {
                    failure = "injecting \(kind.rawValue): \(error)"
                    break
                }
                nextFault += faultInterval
            }
            if now >= nextNote {
                let rss = samples.value.withLock { $0.last?.sample.rss ?? 0 }
                let counts = sensors.map { "\($0.name) \(recorder.readings(of: $0).count)/\($0.emissions.count)" }
                    .joined(separator: ", ")
                say(
                    "\(Int((now - start) / 60)) min: RSS \(rss.megabytes.formatted(2)) MB, \(faults.count) faults, readings \(counts), load \(loadAverage())"
                )
                nextNote += 60
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        let stopped = monotonic()
        rotation.stop()
        for sensor in sensors { sensor.stop() }
        sampler.cancel()
        // Let the last readings through (a replay after the last fault, the subscriber's session).
        let drain = monotonic() + 30
        while monotonic() < drain,
            sensors.contains(where: {
                SensorAccount(emissions: $0.emissions, readings: recorder.readings(of: $0)).lost > 0
            })
        {
            try await Task.sleep(for: .milliseconds(200))
        }
        if let sample = ProcessSample.read(gattway.child.pid) {
            samples.value.withLock { $0.append((monotonic(), sample)) }
        }
        let alive = gattway.child.isRunning
        let reports = await world.simulator.counterValues().advertisementReports - reportsAtStart
        let report = SoakReport(
            SoakReport.Inputs(
                minutes: minutes, warmup: warmup, start: start, end: stopped, loadAtStart: loadAtStart,
                alive: alive && failure == nil, checkedAt: monotonic(),
                exitNote: failure.map { " (\($0))" } ?? "",
                sensors: sensors.map { ($0, $0.emissions, recorder.readings(of: $0)) }, faults: faults,
                samples: samples.value.withLock { $0 }, healths: recorder.healths, advertisersAdded: rotation.added,
                advertisementReports: reports, stateMessages: recorder.stateMessages))
        gattway.stop()
        await recorder.close()
        await world.stop()

        BenchTable.print(report.rows)
        let path = ProcessInfo.processInfo.environment["SOAK_RESULTS"] ?? "bench/soak-results.json"
        try report.write(to: path)
        say(
            "\(report.passed ? "PASSED" : "FAILED"): every target \(report.passed ? "met" : "not met") (figures and samples in \(path)); load \(report.loadAtEnd)"
        )
        if !report.passed || failure != nil {
            say(
                "gattway log (last 40 lines):\n"
                    + gattway.child.log().split(separator: "\n").suffix(40).joined(separator: "\n"))
        }
        return report.passed
    }
}
