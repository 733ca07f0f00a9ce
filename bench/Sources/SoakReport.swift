import Foundation

/// The figures of one soak and whether each target was met (RELIABILITY.md).
struct SoakReport: Encodable {
    /// One RSS sample of the gattway process.
    struct Sample: Encodable {
        /// Seconds since the soak began.
        var t: Double
        var rssMB: Double
        /// Of `rssMB`, anonymous memory (heap, arenas, stacks); the rest is mapped files' pages.
        var anonMB: Double
        var cpuSeconds: Double
    }

    struct Fault: Encodable {
        var fault: String
        /// Seconds since the soak began.
        var at: Double
        var lasted: Double
        /// Until every connected sensor's first value sent after the fault arrived (nil: never).
        var recovery: Double?
        /// Whether both sensors were sending when it began (false: still down from an earlier fault).
        var sensorsUp: Bool
    }

    var date: String
    var minutes: Double
    var warmupMinutes: Double
    var loadAtStart: String
    var loadAtEnd: String
    var passed: Bool
    var rows: [BenchRow] = []
    var samples: [Sample] = []
    var faults: [Fault] = []

    /// What the soak recorded, in one place for ``init(_:)``.
    struct Inputs {
        var minutes: Double
        var warmup: Double
        var start: Double
        var end: Double
        var loadAtStart: String
        var alive: Bool
        /// When `alive` was checked, after the last readings drained.
        var checkedAt: Double
        var exitNote: String
        var sensors: [(CounterSensor, [CounterSensor.Emission], [SensorRecorder.Reading])]
        var faults: [SoakFault.Record]
        var samples: [(time: Double, sample: ProcessSample)]
        var healths: [SensorRecorder.Health]
        var advertisersAdded: Int
        var advertisementReports: Int
        var stateMessages: Int
    }

    init(_ inputs: Inputs) {
        date = ISO8601DateFormatter().string(from: Date())
        minutes = inputs.minutes
        warmupMinutes = inputs.warmup / 60
        loadAtStart = inputs.loadAtStart
        loadAtEnd = loadAverage()
        let elapsed = inputs.end - inputs.start
        let warmupEnd = inputs.start + inputs.warmup
        var passed = true

        // Alive.
        let lastHealth = inputs.healths.last?.arrival ?? 0
        let healthy = inputs.alive && inputs.checkedAt - lastHealth < 25
        passed = passed && healthy
        rows.append(
            BenchRow(
                name: "soak: gattway alive at the end", value: healthy ? 1 : 0, unit: "", target: "1",
                detail:
                    "process running: \(inputs.alive)\(inputs.exitNote); last bridge/health \(Int(inputs.checkedAt - lastHealth)) s before the check"
            ))

        // Memory.
        samples = inputs.samples.map {
            Sample(
                t: ($0.time - inputs.start).rounded(), rssMB: $0.sample.rss.megabytes,
                anonMB: $0.sample.rssAnon.megabytes,
                cpuSeconds: $0.sample.cpuSeconds)
        }
        let after = inputs.samples.filter { $0.time >= warmupEnd }
        if let baseline = after.first, let last = after.last {
            let growth = (last.sample.rss - baseline.sample.rss).megabytes
            let anonGrowth = (last.sample.rssAnon - baseline.sample.rssAnon).megabytes
            let peak = after.map(\.sample.rss).max() ?? 0
            let judged = inputs.minutes >= 15
            if judged { passed = passed && growth < 1 }
            let registry = { (time: Double) in
                inputs.healths.first { $0.arrival >= time }.map { "\(Int($0.devices))" } ?? "?"
            }
            rows.append(
                BenchRow(
                    name: "soak: RSS growth after the warm-up", value: growth, unit: "MB",
                    target: judged ? "< 1" : "not judged",
                    detail: (judged ? "" : "judged from 15 min on; ")
                        + "\(baseline.sample.rss.megabytes.formatted(2)) MB at \(Int((baseline.time - inputs.start) / 60)) min → \(last.sample.rss.megabytes.formatted(2)) MB at the end "
                        + "(anonymous \(anonGrowth.formatted(2)) MB of it, mapped files \((growth - anonGrowth).formatted(2)) MB); "
                        + "max \(peak.megabytes.formatted(2)) MB; least-squares slope \(Self.slope(after).formatted(2)) MB/h over \(after.count) samples; "
                        + "devices in the registry \(registry(baseline.time)) → \(inputs.healths.last.map { "\(Int($0.devices))" } ?? "?")"
                ))
        }
        if let first = inputs.samples.first {
            rows.append(
                BenchRow(
                    name: "soak: RSS 10 s after start", value: first.sample.rss.megabytes, unit: "MB",
                    detail: "VmRSS every 10 s (samples in the JSON): "
                        + inputs.samples.map { $0.sample.rss.megabytes.formatted(1) }.joined(separator: " ")))
        }

        // Readings of the connected sensors.
        var lostTotal = 0
        var accounts: [(CounterSensor, SensorAccount, [CounterSensor.Emission])] = []
        var details: [String] = []
        for (sensor, emissions, readings) in inputs.sensors {
            let account = SensorAccount(emissions: emissions, readings: readings)
            accounts.append((sensor, account, emissions))
            lostTotal += account.lost + account.unexpected
            let latencies = account.latencies(emissions)
            let percentile = { (p: Double) in
                latencies.isEmpty ? 0 : latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))]
            }
            details.append(
                "\(sensor.name) \(account.delivered)/\(account.emitted) (lost \(account.lost), unexpected \(account.unexpected), "
                    + "QoS 1 redeliveries \(account.redeliveries), republished \(account.repeats); sending "
                    + "\(Int(Double(account.emitted) * sensor.interval / elapsed * 100)) % of the time; sent → received p50 "
                    + "\(percentile(0.5).formatted(2)) s, p99 \(percentile(0.99).formatted(2)) s, max \(latencies.last?.formatted(2) ?? "?") s)"
                    + (account.examples.isEmpty ? "" : ": " + account.examples.joined(separator: "; ")))
        }
        passed = passed && lostTotal == 0
        rows.append(
            BenchRow(
                name: "soak: readings lost, connected devices", value: Double(lostTotal), unit: "readings", target: "0",
                detail: details.joined(separator: "; ")))

        // Faults and recovery.
        var recoveredCount = 0
        var byKind: [SoakFault: [Double]] = [:]
        var downAtStart: [SoakFault: Int] = [:]
        for record in inputs.faults {
            let times = accounts.map { $0.1.recovery(after: record.ended, emissions: $0.2) }
            let recovery: Double? = times.contains { $0 == nil } ? nil : times.compactMap { $0 }.max()
            if let recovery {
                recoveredCount += 1
                byKind[record.fault, default: []].append(recovery)
            }
            // Sending when the fault began: a value within the last 2.5 intervals.
            let up = accounts.allSatisfy { sensor, _, emissions in
                emissions.contains { $0.time <= record.started && $0.time > record.started - 2.5 * sensor.interval }
            }
            if !up { downAtStart[record.fault, default: 0] += 1 }
            faults.append(
                Fault(
                    fault: record.fault.rawValue, at: (record.started - inputs.start).rounded(),
                    lasted: record.ended - record.started,
                    recovery: recovery, sensorsUp: up))
        }
        passed = passed && recoveredCount == inputs.faults.count
        rows.append(
            BenchRow(
                name: "soak: faults recovered", value: Double(recoveredCount), unit: "of \(inputs.faults.count)",
                target: "all",
                detail: "one every \(Int(Soak.faultInterval)) s, in turn: "
                    + SoakFault.allCases.map(\.rawValue).joined(separator: ", ")))
        for kind in SoakFault.allCases {
            let times = (byKind[kind] ?? []).sorted()
            let count = inputs.faults.count { $0.fault == kind }
            guard !times.isEmpty else {
                rows.append(
                    BenchRow(
                        name: "soak: recovery after \(kind.rawValue), p50", value: 0, unit: "s",
                        detail: "none of \(count) recovered"))
                continue
            }
            let down = downAtStart[kind] ?? 0
            rows.append(
                BenchRow(
                    name: "soak: recovery after \(kind.rawValue), p50", value: times[times.count / 2], unit: "s",
                    detail: "max \(times.last?.formatted(2) ?? "?") s over \(times.count) of \(count)"
                        + (down > 0 ? " (\(down) began with a sensor still down from an earlier fault)" : "")
                        + "; from the end of the fault to the arrival of the first value each connected sensor sent after it"
                ))
        }

        // CPU per message, from gattway's own health (CPU seconds and messages published).
        let healths = inputs.healths.filter { $0.cpuSeconds != nil }
        if let from = healths.first(where: { $0.arrival >= warmupEnd }) ?? healths.first, let to = healths.last,
            to.published > from.published,
            let cpuFrom = from.cpuSeconds, let cpuTo = to.cpuSeconds
        {
            let messages = to.published - from.published
            let cpu = cpuTo - cpuFrom
            let seconds = to.arrival - from.arrival
            rows.append(
                BenchRow(
                    name: "soak: gattway CPU per message", value: cpu / messages * 1e6, unit: "µs",
                    detail: "\(cpu.formatted(1)) CPU s for \(Int(messages)) messages published in \(Int(seconds)) s "
                        + "(\(Int(messages / seconds))/s, \((cpu / seconds * 100).formatted(1)) % of a core), from bridge/health"
                ))
        }
        // The state directory stays writable: every report says the queue file is durable.
        let notDurable = inputs.healths.count { $0.durable != true }
        passed = passed && notDurable == 0
        rows.append(
            BenchRow(
                name: "soak: bridge/health messages", value: Double(inputs.healths.count), unit: "",
                target: "durable in all",
                detail:
                    "store_and_forward.durable not true in \(notDurable); max queue depth \(Int(inputs.healths.map(\.queueDepth).max() ?? 0))"
            ))
        rows.append(
            BenchRow(
                name: "soak: advertisements", value: Double(inputs.advertisementReports) / elapsed, unit: "adv/s",
                detail:
                    "\(inputs.advertisementReports) reports by the simulator; \(inputs.advertisersAdded) distinct ATC1441 addresses "
                    + "(\(SoakScenario.advertisers) at a time); \(inputs.stateMessages) state messages seen at QoS 0"))
        self.passed = passed
    }

    /// Least-squares slope of RSS over time, MB per hour.
    static func slope(_ samples: [(time: Double, sample: ProcessSample)]) -> Double {
        guard samples.count >= 2 else { return 0 }
        let n = Double(samples.count)
        let meanT = samples.map(\.time).reduce(0, +) / n
        let meanR = samples.map { $0.sample.rss.megabytes }.reduce(0, +) / n
        var numerator = 0.0
        var denominator = 0.0
        for entry in samples {
            numerator += (entry.time - meanT) * (entry.sample.rss.megabytes - meanR)
            denominator += (entry.time - meanT) * (entry.time - meanT)
        }
        return denominator > 0 ? numerator / denominator * 3600 : 0
    }

    func write(to path: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        var data = try encoder.encode(self)
        data.append(0x0A)
        try data.write(to: URL(fileURLWithPath: path))
    }
}
