import BlueZSimulator
import EventLoop
import Foundation
import MQTT
import TestSupport

/// `gattway-bench run gateway` (issue #8): `gattway run` as a child process on a private
/// dbus-daemon with the BlueZ simulator, publishing to a private mosquitto; an in-process
/// subscriber counts; CPU and RSS of the gattway process from /proc. Every compared figure is
/// measured in this one run: the D-Bus and MQTT ceilings, the notification pipeline at QoS 0
/// and 1, latency, the advertisement pipeline stepped up, memory under rotating addresses, and
/// Theengs Gateway on the same advertisement workload (``PeerBench``).
enum GatewayBench: BenchSuite {
    static let name = "gateway"

    static let notifyDevices = 20
    static let notifyPerDevice = 5_000
    static let latencyRate = 1_000.0
    static let latencySeconds = 30.0
    static let advertisers = 1_000
    static let advertisementRates = [2_000.0, 4_000, 8_000, 12_000, 16_000, 24_000]
    static let stepSeconds = 5.0
    static let rotatingAddresses = 100_000
    static let rotationSeconds = 150.0

    static var notifyAddresses: [String] {
        (1...notifyDevices).map { String(format: "A4:C1:38:00:01:%02X", $0) }
    }

    /// 20 connectable environmental sensors: 181A with Temperature 2A6E (read, notify).
    static var notificationScenario: String {
        let devices = notifyAddresses.map {
            """
            {"address": "\($0)", "interval": "500ms", "service_uuids": ["181A"], "faults": {"connect_delay": "10ms"},
             "gatt": [{"uuid": "181A", "characteristics": [{"uuid": "2A6E", "flags": ["read", "notify"], "value": {"hex": "3408"}}]}]}
            """
        }
        return """
            {"timing": {"disconnect_delay": "10ms", "resolve_delay": "10ms", "gatt_latency": 0},
             "devices": [\(devices.joined(separator: ",\n"))]}
            """
    }

    static let emptyScenario =
        #"{"timing": {"disconnect_delay": "10ms", "resolve_delay": "10ms", "gatt_latency": 0, "temporary_timeout": "1h"}}"#

    /// gattway's config for the notification pipeline. Home Assistant discovery and the health
    /// message are off (they cost without being measured); the 2A6E value goes through a
    /// declarative parser because the simulator's burst carries a u32 sequence number (4 bytes)
    /// where the SIG Temperature parser insists on 2: `temperature` is its low s16 × 0.01,
    /// `counter` the whole u32 (the sequence, or in the latency phase the emit time in µs).
    static func notificationConfig(port: UInt16, qos: Int) -> String {
        """
        {"mqtt": {"server": "mqtt://127.0.0.1:\(port)", "client_id": "gattway-bench", "protocol": "3.1.1", "qos": \(qos)},
         "bluetooth": {"scan": {"services": ["181A"]}, "max_connections": \(notifyDevices), "connect_timeout": "10s"},
         "homeassistant": {"enabled": false}, "health": {"enabled": false},
         "parsers": {"bench_temperature": {"fields": [
            {"name": "temperature", "offset": 0, "type": "s16le", "scale": 0.01, "unit": "°C", "device_class": "temperature"},
            {"name": "counter", "offset": 0, "type": "u32le"}]}},
         "devices": [{"match": {"address_prefix": "A4:C1:38:00:01"}, "connect": true, "advertisements": false,
                      "subscribe": [{"service": "181A", "characteristic": "2A6E", "parser": "bench_temperature"}]}]}
        """
    }

    /// gattway's config for the advertisement pipeline: every device, advertisements decoded
    /// by the built-in parsers, QoS 0 (as Theengs Gateway publishes), HA discovery and health off.
    /// `reportBatch`: `bluetooth.report_batch` (nil: the default).
    static func advertisementConfig(
        port: UInt16, maxDevices: Int, reportBatch: String? = nil, rawAdvertisements: String? = nil,
        web: String? = nil
    ) -> String {
        """
        {\(web.map { "\"web\": \($0), " } ?? "")"mqtt": {"server": "mqtt://127.0.0.1:\(port)", "client_id": "gattway-bench", "protocol": "3.1.1", "qos": 0\(rawAdvertisements.map { ", \"raw_advertisements\": \($0)" } ?? "")},
         "bluetooth": {"max_devices": \(maxDevices)\(reportBatch.map { #", "report_batch": "\#($0)""# } ?? "")},
         "homeassistant": {"enabled": false}, "health": {"enabled": false},
         "devices": [{"match": {}}]}
        """
    }

    static func run() async throws -> [BenchRow] {
        var rows: [BenchRow] = []
        let broker = try await MosquittoBroker()
        defer { broker.stop() }
        FileHandle.standardError.write(Data("gateway: load average \(loadAverage()) at start\n".utf8))

        // 1. Ceilings, in this run.
        let ceiling = try await dbusCeiling()
        rows.append(
            BenchRow(
                name: "ceiling: D-Bus notifications into a minimal receiver", value: ceiling.receiveRate,
                unit: "signals/s",
                detail:
                    "\(ceiling.received)/\(ceiling.emitted) from simulator Burst rate 0 on \(notifyDevices) devices × \(notifyPerDevice) (2A6E); simulator emitted \(Int(ceiling.emitRate))/s"
            ))
        let payload = Array(
            #"{"temperature":21.5,"counter":123456,"rssi":-60,"last_seen":"2026-11-30T17:00:00.000Z"}"#.utf8)
        var mqttCeiling: [Int: Double] = [:]
        for (qos, count) in [(MQTTQoS.atMostOnce, 200_000), (.atLeastOnce, 100_000)] {
            let loop = EventLoop(name: "bench-mqtt")
            var configuration = try MQTTConfiguration(url: broker.url, clientID: "bench-ceiling-\(qos.rawValue)")
            configuration.protocolVersion = .v311
            configuration.maxQueued = count  // the ceiling publishes the whole burst without waiting
            let client = try MQTTClient(configuration: configuration, loop: loop)
            try await client.connect()
            let seconds = try await MQTTBench.measure(
                client: client, loop: loop, qos: qos, count: count, payload: payload)
            await client.disconnect()
            loop.shutdown()
            mqttCeiling[Int(qos.rawValue)] = Double(count) / seconds
            rows.append(
                BenchRow(
                    name: "ceiling: mosquitto publishes, QoS \(qos.rawValue)", value: Double(count) / seconds,
                    unit: "msgs/s",
                    detail: "\(count) × \(payload.count) B from one MQTTClient, counted on completion"))
        }

        // Idle RSS, the issue's baseline, with the resident memory of each mapping.
        rows += await phase("idle") { try await idle(broker: broker) }
        // 2. Notification pipeline at QoS 0 and 1; 4. latency with the QoS 1 process.
        for qos in [0, 1] {
            rows += await phase("notification pipeline QoS \(qos)") {
                try await notificationPipeline(
                    broker: broker, qos: qos, ceiling: ceiling.receiveRate, latency: qos == 1)
            }
        }
        // 3. Advertisement pipeline, stepped up.
        rows += await phase("advertisement pipeline") { try await advertisementSteps(broker: broker) }
        // 6. Side by side with Theengs Gateway on the same advertisement workload.
        rows += await phase("side by side") { try await PeerBench.sideBySide(broker: broker) }
        // Realistic rates: 50 ATC1441 advertisers at 100 and 1,000/s, gattway (and a baseline
        // binary, BENCH_GATTWAY_BASELINE) next to Theengs Gateway, CPU and system calls per message.
        rows += await phase("realistic rates") { try await RealisticBench.run(broker: broker) }
        // 5. Memory under 100k rotating addresses.
        rows += await phase("memory") { try await memory(broker: broker) }

        rows.append(
            BenchRow(
                name: "load average at the end (1/5/15 min)",
                value: Double(loadAverage().split(separator: " ").first ?? "0") ?? 0, unit: "", detail: loadAverage()))
        return rows
    }

    /// `BENCH_PHASES` (comma-separated words, e.g. `notification,memory`) runs only the phases
    /// whose name contains one of them; the ceilings always run.
    static let selectedPhases: [String]? = ProcessInfo.processInfo.environment["BENCH_PHASES"]
        .map { $0.split(separator: ",").map(String.init) }

    /// Runs one phase; a failure becomes a row saying why (and the log), not the end of the run.
    static func phase(_ name: String, _ body: () async throws -> [BenchRow]) async -> [BenchRow] {
        if let selected = selectedPhases, !selected.contains(where: { name.contains($0) }) { return [] }
        FileHandle.standardError.write(Data("gateway: \(name)… (load \(loadAverage()))\n".utf8))
        do {
            return try await body()
        } catch {
            FileHandle.standardError.write(Data("gateway: \(name) failed: \(error)\n".utf8))
            return [
                BenchRow(
                    name: "\(name): FAILED", value: 0, unit: "",
                    detail: "\(error)".split(separator: "\n").first.map(String.init) ?? "")
            ]
        }
    }

    static func dbusCeiling() async throws -> SimulatorBench.BurstResult {
        let world = try await SimulatedWorld(scenario: notificationScenario)
        let result = try await SimulatorBench.burstIntoMinimalClient(
            world: world, addresses: notifyAddresses, uuid: "2A6E", countPerDevice: notifyPerDevice)
        await world.stop()
        return result
    }

    /// Starts gattway on a fresh simulator, waits until it subscribed to 2A6E on every device,
    /// bursts `notifyPerDevice` on each at once, counts at the subscriber.
    static func notificationPipeline(broker: MosquittoBroker, qos: Int, ceiling: Double, latency: Bool) async throws
        -> [BenchRow]
    {
        let world = try await SimulatedWorld(scenario: notificationScenario)
        let mqttQoS: MQTTQoS = qos == 0 ? .atMostOnce : .atLeastOnce
        let subscriber = try await CountingSubscriber(
            brokerPort: broker.port, filter: "gattway/+", qos: mqttQoS, name: "notify\(qos)")
        let gattway = try await GatewayProcess.gattway(
            config: notificationConfig(port: broker.port, qos: qos), world: world)
        defer {
            gattway.stop()
        }
        // Subscribed everywhere once Notify stops failing with NotConnected/NotSubscribed.
        let deadline = Date().addingTimeInterval(60)
        var ready = Set<String>()
        while ready.count < notifyDevices {
            for address in notifyAddresses where !ready.contains(address) {
                if (try? await world.simulator.notify(address: address, uuid: "2A6E", [0x34, 0x08, 0, 0])) != nil {
                    ready.insert(address)
                }
            }
            if Date() > deadline {
                throw BenchError(
                    "gattway subscribed on \(ready.count)/\(notifyDevices) devices within 60 s:\n\(gattway.child.log().suffix(3000))"
                )
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        _ = await subscriber.waitFor(count: notifyDevices, quiet: 1, timeout: 10)
        try await Task.sleep(for: .milliseconds(500))
        subscriber.reset()
        let total = notifyDevices * notifyPerDevice
        let simBefore = await world.simulator.counterValues().notifications
        let (usage, delivered) = try await PhaseUsage.measure(gattway) {
            let start = EventLoop.now()
            for address in notifyAddresses {
                try await world.simulator.burst(address: address, uuid: "2A6E", count: notifyPerDevice, rate: 0)
            }
            let count = await subscriber.waitFor(count: total, quiet: 3, timeout: 120)
            let last = subscriber.snapshot.last
            return (count, Double(last > start ? last - start : 1) / 1e9)
        }
        let emitted = await world.simulator.counterValues().notifications - simBefore
        let rate = Double(delivered.0) / delivered.1
        let lost = emitted - delivered.0
        let name = "notifications → MQTT QoS \(qos)"
        var rows = [
            BenchRow(
                name: "\(name): delivered", value: rate, unit: "msgs/s", target: qos == 0 ? "≥ 80% ceiling" : nil,
                detail:
                    "\(delivered.0)/\(emitted) emitted on \(notifyDevices) devices (Burst rate 0, 2A6E) → decoded → published → counted by a QoS \(qos) subscriber, in \(delivered.1.formatted(2)) s"
            ),
            BenchRow(
                name: "\(name): ratio to D-Bus ceiling", value: rate / ceiling, unit: "×",
                target: qos == 0 ? "≥ 0.80" : nil,
                detail: "ceiling \(Int(ceiling)) signals/s measured in this run"),
            BenchRow(
                name: "\(name): lost", value: Double(lost), unit: "msgs", target: qos == 1 ? "0" : nil,
                detail: "\(emitted) emitted by the simulator − \(delivered.0) received by the subscriber"),
            BenchRow(
                name: "\(name): gattway CPU per 100k msgs",
                value: usage.cpuSeconds / Double(max(delivered.0, 1)) * 100_000, unit: "CPU s",
                detail: "\(usage.cpuSeconds.formatted(2)) CPU s (utime+stime) for \(delivered.0) messages"),
            BenchRow(
                name: "\(name): gattway peak RSS", value: usage.rssPeak.megabytes, unit: "MB", target: "≤ 12",
                detail:
                    "VmRSS sampled every 100 ms (start \(usage.rssStart.megabytes.formatted(1)) MB, end \(usage.rssEnd.megabytes.formatted(1)) MB, VmHWM \((try? gattway.sample.peakRSS.megabytes.formatted(1)) ?? "?") MB)"
            ),
        ]
        if latency {
            rows += try await latencyPhase(world: world, subscriber: subscriber, gattway: gattway, qos: qos)
        }
        gattway.stop()
        await subscriber.close()
        await world.stop()
        return rows
    }

    /// 1,000 notifications/s for 30 s spread over the 20 devices; each value is the simulator's
    /// emit time (µs since the phase started, on the monotonic clock, stamped on the simulator's
    /// loop thread immediately before the signal is queued), which gattway decodes as `counter`;
    /// the subscriber subtracts it from its own monotonic receipt time (same machine, same clock).
    static func latencyPhase(world: SimulatedWorld, subscriber: CountingSubscriber, gattway: GatewayProcess, qos: Int)
        async throws -> [BenchRow]
    {
        try await Task.sleep(for: .seconds(1))
        subscriber.reset()
        let epoch = EventLoop.now()
        subscriber.recordLatency(epoch: epoch)
        let addresses = notifyAddresses
        var sent = 0
        let total = Int(latencyRate * latencySeconds)
        while sent < total {
            let elapsed = Double(EventLoop.now() - epoch) / 1e9
            let due = min(total, Int(elapsed * latencyRate)) - sent
            if due > 0 {
                try await world.simulator.notifyStamped(addresses: addresses, from: sent, count: due, epoch: epoch)
                sent += due
            }
            try await Task.sleep(for: .microseconds(500))
        }
        let received = await subscriber.waitFor(count: total, quiet: 2, timeout: 30)
        let sorted = subscriber.latencies.sorted()
        func percentile(_ p: Double) -> Double {
            guard !sorted.isEmpty else { return 0 }
            return Double(sorted[min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)]) / 1000
        }
        let detail =
            "\(received)/\(total) at \(Int(latencyRate))/s for \(Int(latencySeconds)) s over \(notifyDevices) devices, QoS \(qos); emit time stamped into the value by the simulator, receipt at the subscriber"
        return [
            BenchRow(
                name: "latency p50 (simulator emit → subscriber)", value: percentile(0.5), unit: "ms", detail: detail),
            BenchRow(name: "latency p99", value: percentile(0.99), unit: "ms", target: "< 5"),
            BenchRow(
                name: "latency p99.9", value: percentile(0.999), unit: "ms",
                detail: "max \(Double(sorted.last ?? 0) / 1000) ms"),
        ]
    }

    // MARK: Advertisements

    /// A mixed advertiser: BTHome v2, ATC1441 or Ruuvi RAWv2 by `index % 3`, every report changed
    /// (packet id / counter / sequence) so each one is a new reading.
    static func advertiserJSON(address: String, index: Int, interval: Double, random: Bool = false) -> String {
        let counter = #"{"counter": {"start": 0, "step": 1, "min": 0, "max": 255}}"#
        let temperature = #"{"random": {"min": 18, "max": 26, "resolution": 0.01}}"#
        let data: String
        switch index % 3 {
        case 0:
            data =
                #""service_data": {"FCD2": {"template": "bthome_v2", "fields": {"packet_id": \#(counter), "temperature": \#(temperature)}}}"#
        case 1:
            data =
                #""service_data": {"181A": {"template": "atc1441", "fields": {"counter": \#(counter), "temperature": \#(temperature)}}}"#
        default:
            data =
                #""manufacturer_data": {"0x0499": {"template": "ruuvi_rawv2", "fields": {"sequence": {"counter": {"start": 0, "step": 1, "min": 0, "max": 65535}}, "temperature": \#(temperature)}}}"#
        }
        return
            #"{"address": "\#(address)", "address_type": "\#(random ? "random" : "public")", "interval": \#(interval), "connectable": false, \#(data)}"#
    }

    static func advertiserAddress(_ index: Int) -> String {
        String(format: "C4:7C:8D:%02X:%02X:%02X", (index >> 16) & 0xFF, (index >> 8) & 0xFF, index & 0xFF)
    }

    /// Result of one advertisement window on one gateway process.
    struct AdvertisementWindow {
        var seconds: Double
        var emitted: Int
        var delivered: Int
        var usage: PhaseUsage
        /// Over the whole step, quiet to quiet: the difference is what was dropped.
        var emittedTotal: Int
        var deliveredTotal: Int
        var dropped: Int { emittedTotal - deliveredTotal }
        var emittedRate: Double { Double(emitted) / seconds }
        var deliveredRate: Double { Double(delivered) / seconds }
    }

    /// Adds `advertisers` devices advertising at `rate` in total, lets them run `seconds`
    /// (after `warmup`), removes them, waits for the pipeline to drain; counts the simulator's
    /// reports and the subscriber's messages of the measured window.
    static func advertisementWindow(
        world: SimulatedWorld, subscriber: CountingSubscriber, process: GatewayProcess, rate: Double, seconds: Double,
        warmup: Double = 1
    ) async throws -> AdvertisementWindow {
        // Drops are counted over the whole step, from quiet to quiet (before the devices are
        // added, after they are removed and the pipeline drained), so nothing in flight at a
        // window boundary is miscounted; rates and CPU are those of the steady window inside.
        let base = await world.simulator.counterValues().advertisementReports
        subscriber.reset()
        let interval = advertisingInterval(advertisers: advertisers, rate: rate)
        try await world.simulator.addAdvertisers(count: advertisers, interval: interval)
        try await Task.sleep(for: .seconds(warmup))
        let (usage, window) = try await PhaseUsage.measure(process) {
            let reports0 = await world.simulator.counterValues().advertisementReports
            let delivered0 = subscriber.snapshot.count
            try await Task.sleep(for: .seconds(seconds))
            let reports1 = await world.simulator.counterValues().advertisementReports
            let delivered1 = subscriber.snapshot.count
            return (reports1 - reports0, delivered1 - delivered0)
        }
        await world.simulator.removeAdvertisers(count: advertisers)
        _ = await subscriber.waitFor(count: Int.max, quiet: 1.5, timeout: 30)
        let emittedTotal = await world.simulator.counterValues().advertisementReports - base
        let deliveredTotal = subscriber.snapshot.count
        return AdvertisementWindow(
            seconds: seconds, emitted: window.0, delivered: window.1, usage: usage,
            emittedTotal: emittedTotal, deliveredTotal: deliveredTotal)
    }

    static func advertisementSteps(broker: MosquittoBroker) async throws -> [BenchRow] {
        let world = try await SimulatedWorld(scenario: emptyScenario)
        let subscriber = try await CountingSubscriber(
            brokerPort: broker.port, filter: "gattway/+", qos: .atMostOnce, name: "adv")
        let gattway = try await GatewayProcess.gattway(
            config: advertisementConfig(port: broker.port, maxDevices: 2_000), world: world)
        try await Task.sleep(for: .seconds(1))
        var rows: [BenchRow] = []
        var held: (rate: Double, window: AdvertisementWindow)? = nil
        var steps: [String] = []
        for rate in advertisementRates {
            let window = try await advertisementWindow(
                world: world, subscriber: subscriber, process: gattway, rate: rate, seconds: stepSeconds)
            let dropped = window.dropped
            steps.append(
                "\(Int(rate)): sim \(Int(window.emittedRate))/s, gattway \(Int(window.deliveredRate))/s, dropped \(dropped) of \(window.emittedTotal), CPU \(window.usage.cpuSeconds.formatted(2)) s"
            )
            FileHandle.standardError.write(Data("gateway: advertisements at \(Int(rate))/s: \(steps.last!)\n".utf8))
            guard dropped <= 0 else { break }
            held = (window.emittedRate, window)
            if window.emittedRate < rate * 0.9 { break }  // the simulator's own limit: stop here, say so
        }
        let peak = (try? gattway.sample.peakRSS) ?? 0
        gattway.stop()
        await subscriber.close()
        await world.stop()
        if let held {
            let w = held.window
            rows.append(
                BenchRow(
                    name: "advertisements: highest rate held with no drops", value: w.deliveredRate, unit: "adv/s",
                    detail: "\(advertisers) devices (BTHome v2 / ATC1441 / Ruuvi RAWv2), \(Int(stepSeconds)) s steps: "
                        + steps.joined(separator: "; ")))
            rows.append(
                BenchRow(
                    name: "advertisements: gattway CPU per 1k advertisements",
                    value: w.usage.cpuSeconds / Double(max(w.delivered, 1)) * 1000 * 1000,
                    unit: "CPU ms",
                    detail: "at \(Int(w.deliveredRate))/s: \(w.usage.cpuSeconds.formatted(2)) CPU s for \(w.delivered)")
            )
        } else {
            rows.append(
                BenchRow(
                    name: "advertisements: highest rate held with no drops", value: 0, unit: "adv/s",
                    detail: steps.joined(separator: "; ")))
        }
        rows.append(
            BenchRow(
                name: "advertisements: gattway peak RSS", value: peak.megabytes, unit: "MB", target: "≤ 12",
                detail: "VmHWM over all steps"))
        return rows
    }

    // MARK: Idle

    /// `gattway run` connected to the broker and scanning a simulator with no devices, 10 s after
    /// it said "gateway started": VmRSS, and the resident kB of the gattway binary's mappings, the
    /// C libraries and anonymous memory from /proc/PID/smaps; and the CPU it used in those 10 s
    /// (utime + stime, in ticks of 1/CLK_TCK s, and the finer on-CPU time of its threads from
    /// schedstat). `executable` and `label` measure another binary (the realistic suite's baseline).
    static func idle(
        broker: MosquittoBroker, executable: String? = nil, label: String = "gattway", web: String? = nil,
        visit: WebPageClient? = nil
    ) async throws
        -> [BenchRow]
    {
        let world = try await SimulatedWorld(scenario: emptyScenario)
        let gattway = try await GatewayProcess.gattway(
            config: advertisementConfig(port: broker.port, maxDevices: 1_000, web: web), world: world,
            executable: executable)
        // One visit of the page (its health view) before the window: the web server has loaded
        // libmicrohttpd; the client leaves.
        if let visit, !visit.visit("/api/health") { throw BenchError("idle: the web server did not answer the visit") }
        let started = try gattway.sample
        // On-CPU time second by second, so a tail of start-up shows apart from steady idle.
        var threads = ProcessThreads.onCPUNanoseconds(gattway.child.pid)
        var perSecond: [Double] = []
        for _ in 0..<10 {
            try await Task.sleep(for: .seconds(1))
            let now = ProcessThreads.onCPUNanoseconds(gattway.child.pid)
            perSecond.append(Double(ProcessThreads.onCPUNanoseconds(from: threads, to: now)) / 1e6)
            threads = now
        }
        let sample = try gattway.sample
        let onCPU = perSecond.reduce(0, +)
        let mappings = MappingRSS.read(gattway.child.pid)
        gattway.stop()
        await world.stop()
        let cpu = sample.cpuSeconds - started.cpuSeconds
        let ticks = Int((cpu * ProcessSample.ticksPerSecond).rounded())
        return [
            BenchRow(
                name: "idle: \(label) RSS (10 s after start)", value: sample.rss.megabytes, unit: "MB", target: "≤ 12",
                detail: mappings.summary),
            BenchRow(
                name: "idle: \(label) private memory (USS, 10 s after start)", value: mappings.privateMegabytes,
                unit: "MB",
                detail:
                    "Private_Clean + Private_Dirty of every mapping; PSS \(mappings.proportionalMegabytes.formatted(2)) MB"
            ),
            BenchRow(
                name: "idle: \(label) CPU (10 s after start)", value: cpu * 1000, unit: "CPU ms", target: "0",
                detail:
                    "\(ticks) ticks of \(Int(1000 / ProcessSample.ticksPerSecond)) ms (utime+stime) from \"gateway started\" to 10 s later; "
                    + "on a CPU \(onCPU.formatted(2)) ms (schedstat of its threads; per second "
                    + perSecond.map { $0.formatted(2) }.joined(separator: " ") + ")"),
        ]
    }

    // MARK: Memory

    /// `rotatingAddresses` distinct random addresses over `rotationSeconds`: 1,000 advertise at
    /// once (500 ms interval, 2,000 adv/s), the oldest replaced by a new address continuously.
    static func memory(broker: MosquittoBroker) async throws -> [BenchRow] {
        let world = try await SimulatedWorld(scenario: emptyScenario)
        let subscriber = try await CountingSubscriber(
            brokerPort: broker.port, filter: "gattway/+", qos: .atMostOnce, name: "mem")
        let gattway = try await GatewayProcess.gattway(
            config: advertisementConfig(port: broker.port, maxDevices: 1_000), world: world)
        let live = 1_000
        let interval = 0.5
        try await world.simulator.startRotation(live: live, interval: interval)
        try await Task.sleep(for: .seconds(3))
        let start = try gattway.sample
        let sampler = RSSSampler(pid: gattway.child.pid, interval: .milliseconds(250))
        let began = Date()
        var added = live
        while added < rotatingAddresses {
            let due = min(
                rotatingAddresses,
                live + Int(Date().timeIntervalSince(began) / rotationSeconds * Double(rotatingAddresses - live)))
            if due > added {
                try await world.simulator.rotate(count: due - added, interval: interval)
                added = due
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        try await Task.sleep(for: .seconds(3))
        let end = try gattway.sample
        let mappings = MappingRSS.read(gattway.child.pid)
        sampler.stop()
        let reports = await world.simulator.counterValues().advertisementReports
        let messages = subscriber.snapshot.count
        let seconds = Date().timeIntervalSince(began)
        gattway.stop()
        await subscriber.close()
        await world.stop()
        let peak = max(sampler.peak, end.rss)
        let detail =
            "\(rotatingAddresses) distinct random addresses in \(Int(seconds)) s (\(live) live at a time, \(Int(Double(live) / interval)) adv/s; \(reports) reports, \(messages) messages; max_devices 1000)"
        return [
            BenchRow(
                name: "memory: RSS at start (rotating addresses)", value: start.rss.megabytes, unit: "MB",
                detail: detail),
            BenchRow(name: "memory: peak RSS", value: peak.megabytes, unit: "MB", target: "≤ 12"),
            BenchRow(name: "memory: RSS at end", value: end.rss.megabytes, unit: "MB", detail: mappings.summary),
            BenchRow(
                name: "memory: growth start → end", value: (end.rss - start.rss).megabytes, unit: "MB", target: "< 2",
                detail: "CPU \(end.cpuSeconds - start.cpuSeconds) s"),
        ]
    }
}

extension BlueZSimulator {
    /// Notifies `count` values round-robin over `addresses` (2A6E), each value the emit time in
    /// µs since `epoch` (u32 little-endian), stamped just before its signal is queued.
    func notifyStamped(addresses: [String], from start: Int, count: Int, epoch: UInt64) throws {
        for index in start..<(start + count) {
            let micros = UInt32(truncatingIfNeeded: (EventLoop.now() - epoch) / 1000)
            try notify(
                address: addresses[index % addresses.count], uuid: "2A6E",
                (0..<4).map { UInt8(truncatingIfNeeded: micros >> (8 * $0)) })
        }
    }

    func addAdvertisers(count: Int, interval: Double) throws {
        for index in 0..<count {
            try addDevice(
                json: GatewayBench.advertiserJSON(
                    address: GatewayBench.advertiserAddress(index), index: index, interval: interval))
        }
    }

    func removeAdvertisers(count: Int) {
        for index in 0..<count { try? removeDevice(address: GatewayBench.advertiserAddress(index)) }
    }

    /// Rotation state lives in the bench: a FIFO of live random addresses.
    func startRotation(live: Int, interval: Double) throws {
        for _ in 0..<live { try addRandomAdvertiser(interval: interval) }
    }

    func rotate(count: Int, interval: Double) throws {
        for _ in 0..<count {
            if let oldest = RotationQueue.shared.popOldest() { try? removeDevice(address: oldest) }
            try addRandomAdvertiser(interval: interval)
        }
    }

    private func addRandomAdvertiser(interval: Double) throws {
        // A resolvable private address: the two top bits 01.
        var bytes = (0..<6).map { _ in UInt8.random(in: 0...255) }
        bytes[0] = (bytes[0] & 0x3F) | 0x40
        let address = bytes.map { String(format: "%02X", $0) }.joined(separator: ":")
        RotationQueue.shared.push(address)
        try addDevice(
            json: GatewayBench.advertiserJSON(address: address, index: Int(bytes[5]), interval: interval, random: true))
    }
}

/// The live rotating addresses, oldest first (touched only from the simulator's loop thread).
final class RotationQueue: @unchecked Sendable {
    // Invariant for @unchecked Sendable: used only inside BlueZSimulator-isolated methods, i.e.
    // on the simulator's loop thread.
    static let shared = RotationQueue()
    private var items: [String] = []
    private var head = 0
    func push(_ address: String) { items.append(address) }
    func popOldest() -> String? {
        guard head < items.count else { return nil }
        defer { head += 1 }
        return items[head]
    }
}
