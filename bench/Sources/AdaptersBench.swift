import BlueZSimulator
import Foundation
import TestSupport

/// `gattway-bench run adapters` (`bluetooth.adapters`, docs/config.md "Several adapters"): what a
/// second adapter that hears the same devices costs gattway. 50 ATC1441 thermometers, aligned
/// (the same frame at the same moment on every adapter, as two dongles side by side hear one
/// sensor), each with an interval of its own (0.9–1.1 × the mean, so that the devices drift
/// through each other's phases as a radio's do rather than advertising in lockstep: the spread
/// is measured and shown per step), on bluetoothd's D-Bus view, heard by one adapter and then by
/// two, at 100 and 1,000 adv/s per adapter. Per step: gattway's CPU µs per report (the simulator's reports, of every
/// adapter) and per published message (each frame once, however many adapters heard it), over a
/// 20 s window after 5 s of warm-up, each configuration on a fresh simulator.
enum AdaptersBench: BenchSuite {
    static let name = "adapters"
    static let onlyWhenNamed = true
    static let advertisers = 50
    static let rates = [100.0, 1_000]
    static let warmup = 5.0
    static let seconds = 20.0

    static func scenario(adapters: Int, interval: Double) -> String {
        let names = (0..<adapters).map { "hci\($0)" }
        let adapterJSON = names.enumerated().map {
            #"{"name": "\#($0.element)", "address": "00:AA:01:00:00:0\#($0.offset)"}"#
        }
        var devices: [String] = []
        for adapter in names {
            for index in 0..<advertisers {
                let json = RealisticBench.advertiserJSON(
                    index: index, interval: spreadInterval(interval, index: index), aligned: true)
                devices.append(
                    json.replacingOccurrences(of: #"{"address""#, with: #"{"adapter": "\#(adapter)", "address""#))
            }
        }
        return
            #"{"timing": {"disconnect_delay": "10ms", "resolve_delay": "10ms", "gatt_latency": 0, "temporary_timeout": "1h"}, "#
            + #""adapters": [\#(adapterJSON.joined(separator: ", "))], "devices": [\#(devices.joined(separator: ",\n"))]}"#
    }

    /// Device `index`'s interval: from 0.9 to 1.1 × `interval` across the devices, the same on
    /// every adapter (its copies stay aligned), different between devices (no lockstep).
    static func spreadInterval(_ interval: Double, index: Int) -> Double {
        interval * (0.9 + 0.2 * Double(index) / Double(max(1, advertisers - 1)))
    }

    struct Step {
        var adapters: Int
        /// The frames' spread over time (one adapter's copy of each).
        var spread: ReportSpread
        var rate: Double
        var reports: Int
        var messages: Int
        var cpuSeconds: Double
        var microsPerReport: Double { reports > 0 ? cpuSeconds * 1e6 / Double(reports) : 0 }
        var microsPerMessage: Double { messages > 0 ? cpuSeconds * 1e6 / Double(messages) : 0 }
    }

    static func run() async throws -> [BenchRow] {
        let broker = try await MosquittoBroker()
        defer { broker.stop() }
        var rows = [
            BenchRow(
                name: "adapters: setup", value: Double(advertisers), unit: "advertisers",
                detail: "ATC1441 (181A), aligned across adapters, intervals 0.9–1.1 × the mean (no lockstep), "
                    + "heard by 1 and then 2 adapters (D-Bus path), "
                    + "\(rates.map { String(Int($0)) }.joined(separator: " and ")) adv/s per adapter, "
                    + "\(Int(warmup)) s warm-up, CPU over \(Int(seconds)) s; load \(loadAverage()) at start")
        ]
        var steps: [Step] = []
        for rate in rates {
            for adapters in [1, 2] {
                FileHandle.standardError.write(Data("adapters: \(adapters) at \(Int(rate)) adv/s each\n".utf8))
                steps.append(try await measure(adapters: adapters, rate: rate, broker: broker))
            }
        }
        for step in steps {
            let label = "adapters: \(step.adapters) adapter(s) at \(Int(step.rate)) adv/s each"
            rows.append(
                BenchRow(
                    name: label + ", CPU per report", value: step.microsPerReport, unit: "µs",
                    detail: "\(step.reports) reports, \(step.messages) messages in \(Int(seconds)) s"))
            rows.append(BenchRow(name: label + ", CPU per message", value: step.microsPerMessage, unit: "µs"))
            rows.append(
                BenchRow(
                    name: label + ", frames per simulator turn", value: step.spread.reportsPerTurn, unit: "",
                    detail: step.spread.summary))
        }
        for rate in rates {
            let pair = steps.filter { $0.rate == rate }
            guard pair.count == 2, pair[0].microsPerReport > 0 else { continue }
            rows.append(
                BenchRow(
                    name: "adapters: 2 ÷ 1 adapter at \(Int(rate)) adv/s each, CPU per report",
                    value: pair[1].microsPerReport / pair[0].microsPerReport, unit: "×",
                    detail: "messages: \(pair[1].messages) with 2, \(pair[0].messages) with 1"))
        }
        return rows
    }

    static func measure(adapters: Int, rate: Double, broker: MosquittoBroker) async throws -> Step {
        let interval = Double(advertisers) / rate
        let world = try await SimulatedWorld(scenario: scenario(adapters: adapters, interval: interval))
        var subscriber: CountingSubscriber?
        var process: GatewayProcess?
        do {
            let counting = try await CountingSubscriber(
                brokerPort: broker.port, filter: "gattway/+", qos: .atMostOnce, name: "adapters-\(adapters)")
            subscriber = counting
            let names = (0..<adapters).map { #""hci\#($0)""# }.joined(separator: ", ")
            let config = GatewayBench.advertisementConfig(port: broker.port, maxDevices: 1_000)
                .replacingOccurrences(
                    of: #""bluetooth": {"#, with: #""bluetooth": {"adapters": [\#(names)], "radio": "dbus", "#)
            let started = try await GatewayProcess.gattway(config: config, world: world)
            process = started
            try await Task.sleep(for: .seconds(warmup))
            let onCPU0 = ProcessThreads.onCPUNanoseconds(started.child.pid)
            let reports0 = await world.simulator.counterValues().advertisementReports
            let messages0 = counting.snapshot.count
            await world.simulator.startRecordingReports()
            try await Task.sleep(for: .seconds(seconds))
            let times = await world.simulator.stopRecordingReports()
            let reports1 = await world.simulator.counterValues().advertisementReports
            let messages1 = counting.snapshot.count
            let cpu =
                Double(
                    ProcessThreads.onCPUNanoseconds(
                        from: onCPU0, to: ProcessThreads.onCPUNanoseconds(started.child.pid))) / 1e9
            started.stop()
            await counting.close()
            await world.stop()
            // Each frame once: the adapters' copies share the device's address and slot (due time).
            var frames = Set<String>()
            let spread = ReportSpread(times.filter { frames.insert("\($0.address) \($0.due)").inserted })
            return Step(
                adapters: adapters, spread: spread, rate: rate, reports: reports1 - reports0,
                messages: messages1 - messages0, cpuSeconds: cpu)
        } catch {
            process?.stop()
            await subscriber?.close()
            await world.stop()
            throw error
        }
    }
}
