import BlueZSimulator
import EventLoop
import Foundation
import Gateway
import MQTT
import Subprocess
import TestSupport

/// Realistic rates: 50 ATC1441 thermometers (the custom firmware's format, service data 0x181A)
/// advertising 100 and then 1,000 times a second in total, through gattway and then through Theengs
/// Gateway, in the same run, on a fresh simulator each and the same broker. Per rate and gateway:
/// CPU µs per published message (utime + stime over a 30 s window ÷ the messages the subscriber
/// received in it), messages/s, lost messages, and system calls and futex calls per message from
/// `strace -c -f` in a separate 10 s window after the CPU window (strace slows the process it
/// traces, so CPU is never measured while it is attached).
///
/// The advertisers start at random phases of their interval and every event gets advDelay, as a
/// radio's do, so reports arrive spread out, not in bursts of 50; the simulator's record of when
/// it sent them is summarised per step (``ReportSpread``). `BENCH_REALISTIC_ALIGNED=1` makes them
/// `aligned` instead: in lockstep, all 50 in one loop turn, as this bench ran before the
/// simulator's random phases (BENCHMARKS.md, "Realistic rates at random phases").
///
/// `BENCH_GATTWAY_BASELINE=PATH` measures another gattway binary the same way, after gattway and
/// before Theengs, labelled "baseline", with the ratios gattway/baseline: a before/after table
/// from one run.
enum RealisticBench {
    static let advertisers = 50
    static let rates = [100.0, 1_000]
    static let warmup = 5.0
    static let seconds = 30.0
    static let traceSeconds = 10.0
    static let aligned = ProcessInfo.processInfo.environment["BENCH_REALISTIC_ALIGNED"] == "1"
    /// The settings of `bluetooth.report_batch` gattway is measured with, one gattway each:
    /// `BENCH_REPORT_BATCH` (comma-separated durations), else 0 (every report read as it arrives)
    /// and the default.
    static let reportBatches: [String] = {
        let text = ProcessInfo.processInfo.environment["BENCH_REPORT_BATCH"] ?? ""
        let listed = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        return listed.isEmpty ? ["0ms", "\(Int(BluetoothSettings.defaultReportBatch * 1000))ms"] : listed
    }()

    /// `mqtt.raw_advertisements` settings gattway is measured with too (the default
    /// `report_batch`), one gattway each: `BENCH_RAW_ADVERTISEMENTS`, comma-separated, of
    /// `changed` (the default mode, 1 s per address), `all` (every report, 1 s per address) and
    /// `all-0s` (every report published: the worst case); none by default.
    static let rawAdvertisements: [(label: String, json: String)] = {
        let text = ProcessInfo.processInfo.environment["BENCH_RAW_ADVERTISEMENTS"] ?? ""
        return text.split(separator: ",").compactMap { item in
            switch item.trimmingCharacters(in: .whitespaces) {
            case "changed": ("gattway raw changed", #"{"mode": "changed"}"#)
            case "all": ("gattway raw all", #"{"mode": "all"}"#)
            case "all-0s": ("gattway raw all-0s", #"{"mode": "all", "interval": "0s"}"#)
            default: nil
            }
        }
    }()

    /// `BENCH_WEB=1`: gattway measured with the web server off too, and the idle figures with it off and visited.
    static let web = ProcessInfo.processInfo.environment["BENCH_WEB"] == "1"

    /// The row label of gattway with `report_batch` `batch`.
    static func label(batch: String) -> String { "gattway \(batch)" }

    /// The binary `BENCH_GATTWAY_BASELINE` names (relative to the working directory), or nil.
    static func baselineExecutable() throws -> String? {
        guard var path = ProcessInfo.processInfo.environment["BENCH_GATTWAY_BASELINE"], !path.isEmpty else {
            return nil
        }
        if !path.hasPrefix("/") { path = FileManager.default.currentDirectoryPath + "/" + path }
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw BenchError("BENCH_GATTWAY_BASELINE=\(path) is not an executable file")
        }
        return path
    }

    /// LYWSD03MMC thermometers carry Xiaomi's A4:C1:38 prefix, and Theengs' decoder for the
    /// ATC1441 format only takes service data that starts with it.
    static func address(_ index: Int) -> String {
        String(format: "A4:C1:38:5A:%02X:%02X", (index >> 8) & 0xFF, index & 0xFF)
    }

    /// One thermometer: non-connectable, the firmware's `ATC_` name, a frame counter that changes
    /// on every report and random temperature and humidity, so each report is a new reading.
    static func advertiserJSON(index: Int, interval: Double, aligned: Bool = false) -> String {
        let counter = #"{"counter": {"start": 0, "step": 1, "min": 0, "max": 255}}"#
        let temperature = #"{"random": {"min": 18, "max": 26, "resolution": 0.1}}"#
        let humidity = #"{"random": {"min": 30, "max": 60, "resolution": 1}}"#
        let fields = #"{"counter": \#(counter), "temperature": \#(temperature), "humidity": \#(humidity)}"#
        let name = String(format: "ATC_5A%02X%02X", (index >> 8) & 0xFF, index & 0xFF)
        return
            #"{"address": "\#(address(index))", "name": "\#(name)", "interval": \#(interval), "connectable": false, "#
            + #""aligned": \#(aligned), "#
            + #""service_data": {"181A": {"template": "atc1441", "fields": \#(fields)}}}"#
    }

    /// What one gateway did at one rate.
    struct Step {
        var rate: Double
        /// The CPU window: its length, the simulator's reports and the subscriber's messages in it,
        /// and the process's utime + stime over it.
        var seconds: Double
        var emitted: Int
        var delivered: Int
        /// On-CPU seconds over the window (schedstat of every thread), and utime + stime from
        /// /proc/PID/stat (10 ms ticks) for comparison.
        var cpuSeconds: Double
        var tickSeconds: Double
        /// The strace window after it, and the subscriber's messages in that window.
        var trace: SyscallCounts
        var traceMessages: Int
        /// Over the whole step, quiet to quiet (warm-up and strace window included).
        var emittedTotal: Int
        var deliveredTotal: Int
        /// When the simulator sent its reports in the CPU window.
        var spread: ReportSpread
        /// From the simulator's report to the subscriber's message, in the CPU window.
        var latency: ReportLatency

        var lost: Int { emittedTotal - deliveredTotal }
        var messagesPerSecond: Double { Double(delivered) / seconds }
        var cpuMicrosPerMessage: Double { delivered > 0 ? cpuSeconds * 1e6 / Double(delivered) : 0 }
        var syscallsPerMessage: Double { traceMessages > 0 ? Double(trace.total) / Double(traceMessages) : 0 }
        var futexPerMessage: Double { traceMessages > 0 ? Double(trace.futex) / Double(traceMessages) : 0 }
    }

    /// One gateway's steps, or why it could not be measured.
    struct Measured {
        var label: String
        var steps: [Step]
        var failure: String?
    }

    static func run(broker: MosquittoBroker) async throws -> [BenchRow] {
        let baseline = try baselineExecutable()
        let loadAtStart = loadAverage()
        var measured: [Measured] = []
        for batch in reportBatches {
            let config = GatewayBench.advertisementConfig(port: broker.port, maxDevices: 1_000, reportBatch: batch)
            measured.append(
                await measureOrFail(label: label(batch: batch), broker: broker, topic: "gattway/+") { world in
                    try await GatewayProcess.gattway(config: config, world: world)
                })
        }
        for raw in rawAdvertisements {
            let config = GatewayBench.advertisementConfig(
                port: broker.port, maxDevices: 1_000, rawAdvertisements: raw.json)
            measured.append(
                await measureOrFail(label: raw.label, broker: broker, topic: "gattway/+") { world in
                    try await GatewayProcess.gattway(config: config, world: world)
                })
        }
        if web {
            // The same gateway with the web server off; the rows above have it on, nobody looking.
            // What the open page costs is suite `web` (one process: these rows move by up to 25 %
            // between processes).
            let off = GatewayBench.advertisementConfig(
                port: broker.port, maxDevices: 1_000, web: #"{"enabled": false}"#)
            measured.append(
                await measureOrFail(label: "gattway web off", broker: broker, topic: "gattway/+") { world in
                    try await GatewayProcess.gattway(config: off, world: world)
                })
        }
        if let baseline {
            let config = GatewayBench.advertisementConfig(port: broker.port, maxDevices: 1_000)
            measured.append(
                await measureOrFail(label: "baseline", broker: broker, topic: "gattway/+") { world in
                    try await GatewayProcess.gattway(config: config, world: world, executable: baseline)
                })
        }
        if let python = PeerBench.theengsPython {
            measured.append(
                await measureOrFail(label: "Theengs Gateway", broker: broker, topic: "theengs/BTtoMQTT/+") { world in
                    try await PeerBench.startTheengs(python: python, broker: broker, world: world)
                })
        } else {
            measured.append(
                Measured(
                    label: "Theengs Gateway", steps: [],
                    failure: "not measured: no .venv-bench/bin/python (make bench creates it)"))
        }
        var rows = [
            BenchRow(
                name: "realistic: setup", value: Double(advertisers), unit: "advertisers",
                detail: "ATC1441 (181A) at \(rates.map { String(Int($0)) }.joined(separator: " and ")) adv/s in total, "
                    + "\(Int(warmup)) s warm-up, CPU over \(Int(seconds)) s, then strace -c -f over \(Int(traceSeconds)) s; "
                    + "QoS 0, one after the other on a fresh simulator, the same broker; advertisers "
                    + (aligned ? "aligned (lockstep)" : "at random phases with advDelay")
                    + "; gattway with bluetooth.report_batch " + reportBatches.joined(separator: ", ")
                    + (baseline.map { "; baseline \($0)" } ?? "") + "; load \(loadAtStart) at start")
        ]
        for failed in measured where failed.failure != nil {
            rows.append(BenchRow(name: "realistic: \(failed.label)", value: 0, unit: "", detail: failed.failure ?? ""))
        }
        for (index, rate) in rates.enumerated() {
            rows += rateRows(
                rate: rate, measured.compactMap { $0.steps.count > index ? ($0.label, $0.steps[index]) : nil })
        }
        rows.append(
            BenchRow(
                name: "realistic: load average at the end (1/5/15 min)",
                value: Double(loadAverage().split(separator: " ").first ?? "0") ?? 0, unit: "", detail: loadAverage()))
        return rows
    }

    /// The rows of one rate: each gateway's figures, then the ratios.
    static func rateRows(rate: Double, _ steps: [(label: String, step: Step)]) -> [BenchRow] {
        let prefix = "realistic \(Int(rate)) adv/s:"
        var rows: [BenchRow] = []
        for (label, step) in steps {
            let ours = label.hasPrefix("gattway")
            let trace = step.trace
            rows += [
                BenchRow(
                    name: "\(prefix) CPU per msg, \(label)", value: step.cpuMicrosPerMessage, unit: "CPU µs",
                    detail:
                        "\(step.cpuSeconds.formatted(3)) CPU s on a CPU (schedstat; utime+stime \(step.tickSeconds.formatted(2)) s) for \(step.delivered) msgs in "
                        + "\(Int(step.seconds)) s; simulator emitted \(step.emitted)"),
                BenchRow(name: "\(prefix) msgs/s, \(label)", value: step.messagesPerSecond, unit: "msgs/s"),
                BenchRow(
                    name: "\(prefix) lost, \(label)", value: Double(step.lost), unit: "msgs", target: ours ? "0" : nil,
                    detail: "\(step.emittedTotal) emitted − \(step.deliveredTotal) received over the whole step, "
                        + "quiet to quiet"),
                BenchRow(
                    name: "\(prefix) syscalls per msg, \(label)", value: step.syscallsPerMessage, unit: "calls",
                    detail: "\(trace.total) calls for \(step.traceMessages) msgs in \(trace.seconds.formatted(1)) s, "
                        + "\(trace.traced)/\(trace.threads) threads traced (\(trace.attachment)); \(trace.top(5))"),
                BenchRow(
                    name: "\(prefix) futex per msg, \(label)", value: step.futexPerMessage, unit: "calls",
                    target: ours ? "≤ 1" : nil, detail: "\(trace.futex) futex calls"),
                BenchRow(
                    name: "\(prefix) reports per simulator turn, \(label)", value: step.spread.reportsPerTurn,
                    unit: "reports", detail: step.spread.summary),
            ]
            // Theengs' messages carry no frame counter: its latency is not measured.
            if ours {
                rows += [
                    BenchRow(
                        name: "\(prefix) latency p50, \(label)", value: step.latency.p50, unit: "ms",
                        detail: "report to MQTT message: " + step.latency.summary),
                    BenchRow(name: "\(prefix) latency p99, \(label)", value: step.latency.p99, unit: "ms"),
                ]
            }
        }
        for (label, ours) in steps where label.hasPrefix("gattway") {
            func ratio(_ name: String, _ other: String, _ value: (Step) -> Double, target: String? = nil) -> BenchRow? {
                guard other != label, let theirs = steps.first(where: { $0.label == other })?.step else { return nil }
                let denominator = value(theirs)
                return BenchRow(
                    name: "\(prefix) \(name), \(label)/\(other == "Theengs Gateway" ? "Theengs" : other)",
                    value: denominator > 0 ? value(ours) / denominator : 0, unit: "×", target: target,
                    detail: denominator > 0 ? "" : "not comparable: \(other) has no messages")
            }
            rows += [
                ratio("CPU per msg", "Theengs Gateway", \.cpuMicrosPerMessage, target: "≤ 0.10"),
                ratio("syscalls per msg", "Theengs Gateway", \.syscallsPerMessage),
                ratio("CPU per msg", "baseline", \.cpuMicrosPerMessage),
                ratio("CPU per msg", "gattway web off", \.cpuMicrosPerMessage),
                ratio("syscalls per msg", "baseline", \.syscallsPerMessage),
                ratio("futex per msg", "baseline", \.futexPerMessage),
            ].compactMap { $0 }
        }
        return rows
    }

    /// ``measure(label:broker:topic:start:)``, with a failure turned into a reason (so one
    /// gateway failing still leaves the others' rows).
    static func measureOrFail(
        label: String, broker: MosquittoBroker, topic: String,
        start: (SimulatedWorld) async throws -> GatewayProcess
    ) async -> Measured {
        do {
            return Measured(
                label: label, steps: try await measure(label: label, broker: broker, topic: topic, start: start))
        } catch {
            FileHandle.standardError.write(Data("realistic: \(label) failed: \(error)\n".utf8))
            let reason = "\(error)".split(separator: "\n").first.map(String.init) ?? ""
            return Measured(label: label, steps: [], failure: "FAILED: \(reason)")
        }
    }

    /// Starts one gateway on a fresh simulator and runs every rate on it.
    static func measure(
        label: String, broker: MosquittoBroker, topic: String,
        start: (SimulatedWorld) async throws -> GatewayProcess
    ) async throws -> [Step] {
        let world = try await SimulatedWorld(scenario: GatewayBench.emptyScenario)
        var subscriber: CountingSubscriber?
        var process: GatewayProcess?
        do {
            let counting = try await CountingSubscriber(
                brokerPort: broker.port, filter: topic, qos: .atMostOnce,
                name: "realistic-" + label.replacingOccurrences(of: " ", with: "-"))
            subscriber = counting
            let started = try await start(world)
            process = started
            try await Task.sleep(for: .seconds(2))
            var steps: [Step] = []
            for rate in rates {
                FileHandle.standardError.write(
                    Data("realistic: \(label) at \(Int(rate)) adv/s (load \(loadAverage()))\n".utf8))
                let step = try await measureStep(world: world, subscriber: counting, process: started, rate: rate)
                FileHandle.standardError.write(
                    Data(
                        ("realistic: \(label) at \(Int(rate)) adv/s: \(Int(step.messagesPerSecond)) msgs/s, "
                            + "\(step.cpuMicrosPerMessage.formatted(1)) CPU µs/msg, lost \(step.lost), "
                            + "\(step.syscallsPerMessage.formatted(2)) syscalls/msg, "
                            + "\(step.futexPerMessage.formatted(2)) futex/msg\n").utf8))
                steps.append(step)
            }
            started.stop()
            await counting.close()
            await world.stop()
            return steps
        } catch {
            process?.stop()
            await subscriber?.close()
            await world.stop()
            throw error
        }
    }

    /// Adds the advertisers at `rate` in total, warms up, measures CPU, then system calls,
    /// removes them and waits for the pipeline to drain.
    static func measureStep(
        world: SimulatedWorld, subscriber: CountingSubscriber, process: GatewayProcess, rate: Double
    ) async throws -> Step {
        let base = await world.simulator.counterValues().advertisementReports
        subscriber.reset()
        try await world.simulator.addATCAdvertisers(
            count: advertisers, interval: advertisingInterval(advertisers: advertisers, rate: rate, aligned: aligned),
            aligned: aligned)
        try await Task.sleep(for: .seconds(warmup))
        // CPU from each thread's schedstat (nanoseconds on a CPU): at 100 adv/s the whole window
        // is ~10 of /proc/PID/stat's 10 ms ticks, too coarse to compare; the ticks stay in the detail.
        let onCPU0 = ProcessThreads.onCPUNanoseconds(process.child.pid)
        let (usage, window) = try await PhaseUsage.measure(process) {
            await world.simulator.startRecordingReports()
            subscriber.startArrivals()
            let reports0 = await world.simulator.counterValues().advertisementReports
            let delivered0 = subscriber.snapshot.count
            try await Task.sleep(for: .seconds(seconds))
            let reports1 = await world.simulator.counterValues().advertisementReports
            let delivered1 = subscriber.snapshot.count
            let times = await world.simulator.stopRecordingReports()
            let arrivals = subscriber.stopArrivals()
            return (
                emitted: reports1 - reports0, delivered: delivered1 - delivered0, spread: ReportSpread(times),
                latency: ReportLatency(reports: times, arrivals: arrivals)
            )
        }
        let onCPU =
            Double(
                ProcessThreads.onCPUNanoseconds(from: onCPU0, to: ProcessThreads.onCPUNanoseconds(process.child.pid)))
            / 1e9
        let (trace, traceMessages) = try await SyscallTrace.measure(process.child.pid) {
            let delivered0 = subscriber.snapshot.count
            try await Task.sleep(for: .seconds(traceSeconds))
            return subscriber.snapshot.count - delivered0
        }
        let emittedTotal = await world.removeATCAdvertisersBetweenTurns(count: advertisers) - base
        _ = await subscriber.waitFor(count: Int.max, quiet: 2, timeout: 60)
        return Step(
            rate: rate, seconds: seconds, emitted: window.emitted, delivered: window.delivered,
            cpuSeconds: onCPU, tickSeconds: usage.cpuSeconds, trace: trace, traceMessages: traceMessages,
            emittedTotal: emittedTotal, deliveredTotal: subscriber.snapshot.count, spread: window.spread,
            latency: window.latency)
    }
}

/// `gattway-bench run realistic`: the idle figures (of the baseline too, when
/// `BENCH_GATTWAY_BASELINE` names one) and the realistic rates; also part of `gateway`, so
/// `run` without a suite name does not run it twice.
enum RealisticSuite: BenchSuite {
    static let name = "realistic"
    static let onlyWhenNamed = true

    static func run() async throws -> [BenchRow] {
        let broker = try await MosquittoBroker()
        defer { broker.stop() }
        FileHandle.standardError.write(Data("realistic: load average \(loadAverage()) at start\n".utf8))
        var rows = await GatewayBench.phase("idle") { try await GatewayBench.idle(broker: broker) }
        if RealisticBench.web {
            rows += await GatewayBench.phase("idle (web off)") {
                try await GatewayBench.idle(broker: broker, label: "gattway web off", web: #"{"enabled": false}"#)
            }
            rows += await GatewayBench.phase("idle (web visited)") {
                let port = try LoopbackPort.free()
                return try await GatewayBench.idle(
                    broker: broker, label: "gattway web visited", web: WebPageClient.config(port: port),
                    visit: WebPageClient(port: port))
            }
        }
        if let baseline = try RealisticBench.baselineExecutable() {
            rows += await GatewayBench.phase("idle (baseline)") {
                try await GatewayBench.idle(broker: broker, executable: baseline, label: "baseline")
            }
        }
        rows += await GatewayBench.phase("realistic rates") { try await RealisticBench.run(broker: broker) }
        return rows
    }
}

extension SimulatedWorld {
    /// Removes the advertisers at the start of a loop turn and returns the simulator's report
    /// count at that moment.
    ///
    /// The simulator counts a report when it makes it but queues its PropertiesChanged for the end
    /// of the loop turn (coalesced), and removing a device drops its queued signals: a removal
    /// that ran between a report and its signal counted a report that never left the simulator
    /// (seen as 11 and 50 "lost" messages at the end of a step, for gattway and Theengs alike,
    /// with every message the simulator sent received). Reports come from timers, whose signals
    /// go out in the same turn's queue, so at the start of a turn (a prepare hook, before poll)
    /// every report counted so far has been signalled.
    func removeATCAdvertisersBetweenTurns(count: Int) async -> Int {
        let simulator = self.simulator
        let loop = self.loop
        return await withCheckedContinuation { continuation in
            loop.execute {
                final class Hook {
                    var token: EventLoop.Token?
                }
                let hook = Hook()
                hook.token = loop.addPrepareHook {
                    guard let token = hook.token else { return }
                    hook.token = nil
                    loop.removePrepareHook(token)
                    let reports = simulator.assumeIsolated { simulator in
                        let reports = simulator.counterValues().advertisementReports
                        simulator.removeATCAdvertisers(count: count)
                        return reports
                    }
                    continuation.resume(returning: reports)
                }
            }
        }
    }
}

extension BlueZSimulator {
    func addATCAdvertisers(count: Int, interval: Double, aligned: Bool) throws {
        for index in 0..<count {
            try addDevice(json: RealisticBench.advertiserJSON(index: index, interval: interval, aligned: aligned))
        }
    }

    func removeATCAdvertisers(count: Int) {
        for index in 0..<count { try? removeDevice(address: RealisticBench.address(index)) }
    }
}
