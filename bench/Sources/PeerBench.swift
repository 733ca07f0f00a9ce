import Foundation
import MQTT
import TestSupport

/// Side by side (issue #8, figure 6): gattway and Theengs Gateway, one after the other in the
/// same run, on the same advertisement workload (1,000 mixed BTHome v2 / ATC1441 / Ruuvi RAWv2
/// advertisers at `rate` in total, from the same simulator, through the same broker), each
/// measured the same way (/proc CPU and RSS, a subscriber counting its decoded messages).
///
/// Theengs Gateway comes from PyPI in `.venv-bench` (the Makefile's bench target creates it);
/// `BENCH_THEENGS_PYTHON` names another interpreter. It scans through bleak → BlueZ over D-Bus,
/// so `DBUS_SYSTEM_BUS_ADDRESS` puts it on the simulator's private bus unchanged.
enum PeerBench {
    static let rate = 1_000.0
    static let seconds = 15.0

    static var theengsPython: String? {
        var path = ProcessInfo.processInfo.environment["BENCH_THEENGS_PYTHON"] ?? ".venv-bench/bin/python"
        if !path.hasPrefix("/") { path = FileManager.default.currentDirectoryPath + "/" + path }
        return FileManager.default.isExecutableFile(atPath: path) ? path : nil
    }

    struct Figures {
        var window: GatewayBench.AdvertisementWindow
        var peakRSS: Int
        var cpuPerThousand: Double { window.usage.cpuSeconds / Double(max(window.delivered, 1)) * 1000 * 1000 }
    }

    static func sideBySide(broker: MosquittoBroker) async throws -> [BenchRow] {
        let ours = try await measure(broker: broker, topic: "gattway/+") { world in
            try await GatewayProcess.gattway(
                config: GatewayBench.advertisementConfig(port: broker.port, maxDevices: 2_000), world: world)
        }
        guard let python = theengsPython else {
            return [
                BenchRow(
                    name: "Theengs Gateway", value: 0, unit: "",
                    detail: "not measured: no .venv-bench/bin/python (make bench creates it)")
            ]
        }
        let theirs = try await measure(broker: broker, topic: "theengs/BTtoMQTT/+") { world in
            try await startTheengs(python: python, broker: broker, world: world)
        }
        let detail =
            "\(GatewayBench.advertisers) advertisers at \(Int(rate))/s for \(Int(seconds)) s, QoS 0, same simulator and broker, one after the other"
        func row(_ name: String, _ a: Double, _ b: Double, _ unit: String, target: String? = nil, _ extra: String)
            -> [BenchRow]
        {
            [
                BenchRow(name: "side by side: \(name), gattway", value: a, unit: unit, detail: extra),
                BenchRow(name: "side by side: \(name), Theengs Gateway", value: b, unit: unit),
                BenchRow(
                    name: "side by side: \(name), gattway/Theengs", value: b == 0 ? 0 : a / b, unit: "×", target: target
                ),
            ]
        }
        return row(
            "decoded msgs/s", ours.window.deliveredRate, theirs.window.deliveredRate, "msgs/s",
            detail + "; simulator emitted \(Int(ours.window.emittedRate))/s and \(Int(theirs.window.emittedRate))/s")
            + row(
                "CPU per 1k msgs", ours.cpuPerThousand, theirs.cpuPerThousand, "CPU ms", target: "≤ 0.10",
                "gattway \(ours.window.usage.cpuSeconds.formatted(2)) s for \(ours.window.delivered), Theengs \(theirs.window.usage.cpuSeconds.formatted(2)) s for \(theirs.window.delivered)"
            )
            + row(
                "peak RSS", ours.peakRSS.megabytes, theirs.peakRSS.megabytes, "MB", target: "≤ 0.33",
                "VmHWM of each process")
    }

    /// Theengs Gateway on `world`'s bus, publishing decoded messages only (`theengs/BTtoMQTT/<id>`)
    /// to `broker`: continuous active scan, no discovery, no presence, as in the side by side;
    /// returns once its StartDiscovery reached the simulator.
    static func startTheengs(python: String, broker: MosquittoBroker, world: SimulatedWorld) async throws
        -> GatewayProcess
    {
        let dir = try TemporaryDirectory.make(prefix: "bench-theengs")
        let process = try GatewayProcess(
            name: "Theengs Gateway", executable: python,
            arguments: [
                "-m", "TheengsGateway", "-c", dir.appendingPathComponent("theengsgw.conf").path,
                "-H", "127.0.0.1", "-P", String(broker.port), "-a", "hci0", "-s", "active",
                "-sd", "3600", "-tb", "0", "-D", "0", "-pr", "0", "-pa", "0", "-gs", "0", "-ll", "WARNING",
                "-pt", "theengs/BTtoMQTT", "-Lt", "theengs/LWT",
            ],
            world: world, extraEnvironment: ["HOME": dir.path])
        // Scanning once StartDiscovery reached the simulator.
        for _ in 0..<300 {
            if await world.simulator.counterValues().startDiscoveryCalls > 0 { break }
            if !process.child.isRunning {
                throw BenchError("Theengs Gateway exited:\n\(process.child.log().suffix(3000))")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        return process
    }

    static func measure(broker: MosquittoBroker, topic: String, start: (SimulatedWorld) async throws -> GatewayProcess)
        async throws -> Figures
    {
        let world = try await SimulatedWorld(scenario: GatewayBench.emptyScenario)
        let subscriber = try await CountingSubscriber(
            brokerPort: broker.port, filter: topic, qos: .atMostOnce, name: "peer")
        let process = try await start(world)
        try await Task.sleep(for: .seconds(2))
        let window = try await GatewayBench.advertisementWindow(
            world: world, subscriber: subscriber, process: process, rate: rate, seconds: seconds, warmup: 3)
        let peak = (try? process.sample.peakRSS) ?? 0
        process.stop()
        await subscriber.close()
        await world.stop()
        return Figures(window: window, peakRSS: peak)
    }
}

/// `gattway-bench run peers`: only the side-by-side figures (also part of `gateway`).
enum PeerSuite: BenchSuite {
    static let name = "peers"
    static func run() async throws -> [BenchRow] {
        let broker = try await MosquittoBroker()
        defer { broker.stop() }
        return try await PeerBench.sideBySide(broker: broker)
    }
}
