import BlueZSimulator
import EventLoop
import Foundation
import MQTT
import Synchronization
import TestSupport

/// CPU and memory of another process from /proc: `utime + stime` of /proc/PID/stat and
/// `VmRSS`/`VmHWM` of /proc/PID/status.
struct ProcessSample: Sendable {
    /// User + system CPU seconds so far.
    var cpuSeconds: Double
    /// Resident set now, bytes.
    var rss: Int
    /// Peak resident set of the process's life, bytes.
    var peakRSS: Int
    /// The anonymous part of `rss` (heap, arenas, stacks: `RssAnon`), bytes; the rest is mapped
    /// files (the binary's and libraries' pages touched so far, `RssFile`) and shared memory.
    var rssAnon = 0

    static let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))

    static func read(_ pid: Int32) -> ProcessSample? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")"),
            let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        else { return nil }
        // Fields after "comm)": state is field 3, utime 14, stime 15 (proc(5)).
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let utime = Double(fields[11]), let stime = Double(fields[12]) else { return nil }
        func kilobytes(_ key: String) -> Int {
            for line in status.split(separator: "\n") where line.hasPrefix(key) {
                return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "0") ?? 0
            }
            return 0
        }
        return ProcessSample(
            cpuSeconds: (utime + stime) / ticksPerSecond, rss: kilobytes("VmRSS:") * 1024,
            peakRSS: kilobytes("VmHWM:") * 1024, rssAnon: kilobytes("RssAnon:") * 1024)
    }
}

/// Resident kB per mapped file of another process (/proc/PID/smaps), the process's own
/// executable, and anonymous memory (`[anon]`, `[heap]`, `[stack]`, and private copies of file pages
/// are counted under their file, as smaps does).
struct MappingRSS {
    var kilobytesByName: [String: Int] = [:]
    var executable = ""
    /// Private pages (clean and dirty: the process's own, USS) and the proportional set size,
    /// all mappings, in kB.
    var privateKilobytes = 0
    var proportionalKilobytes = 0

    var privateMegabytes: Double { Double(privateKilobytes) / 1024 }
    var proportionalMegabytes: Double { Double(proportionalKilobytes) / 1024 }

    static func read(_ pid: Int32) -> MappingRSS {
        var result = MappingRSS()
        result.executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")) ?? ""
        // Read to the end: procfs files report size 0, and a sized read stops after the first page.
        guard let data = FileHandle(forReadingAtPath: "/proc/\(pid)/smaps")?.readDataToEndOfFile() else {
            return result
        }
        let smaps = String(decoding: data, as: UTF8.self)
        var name = "[anon]"
        for line in smaps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard let first = fields.first else { continue }
            if first.contains("-"), !first.hasSuffix(":") {
                name = fields.count >= 6 ? fields[5...].joined(separator: " ") : "[anon]"
            } else if first == "Rss:", fields.count >= 2, let kilobytes = Int(fields[1]) {
                result.kilobytesByName[name, default: 0] += kilobytes
            } else if first == "Private_Clean:" || first == "Private_Dirty:", fields.count >= 2,
                let kilobytes = Int(fields[1])
            {
                result.privateKilobytes += kilobytes
            } else if first == "Pss:", fields.count >= 2, let kilobytes = Int(fields[1]) {
                result.proportionalKilobytes += kilobytes
            }
        }
        return result
    }

    /// "binary 5.9 MB, libc.so.6 1.6 MB, …" for the mappings of at least 100 kB, largest first.
    var summary: String {
        kilobytesByName.filter { $0.value >= 100 }.sorted { $0.value > $1.value }.map { name, kilobytes in
            let label =
                name == executable ? "the gattway binary" : String(name.split(separator: "/").last ?? Substring(name))
            return "\(label) \((Double(kilobytes) / 1024).formatted(1)) MB"
        }.joined(separator: ", ")
    }
}

/// Samples a process's RSS every `interval` until stopped; reports the peak of the samples.
final class RSSSampler: Sendable {
    private let box = Locked<(peak: Int, last: Int)>((0, 0))
    private let task: Mutex<Task<Void, Never>?> = Mutex(nil)

    init(pid: Int32, interval: Duration = .milliseconds(100)) {
        let handle = Task { [box] in
            while !Task.isCancelled {
                if let sample = ProcessSample.read(pid) {
                    box.value.withLock {
                        $0.peak = max($0.peak, sample.rss)
                        $0.last = sample.rss
                    }
                }
                try? await Task.sleep(for: interval)
            }
        }
        task.withLock { $0 = handle }
    }

    var peak: Int { box.value.withLock { $0.peak } }
    func stop() { task.withLock { $0?.cancel() } }
}

/// The bench's own view of the broker: counts the messages on a topic filter (in-process
/// `MQTTClient` on its own loop thread) and, for latency, the receipt time of each.
final class CountingSubscriber: Sendable {
    private struct State {
        var count = 0
        var first: UInt64 = 0
        var last: UInt64 = 0
        var latencies: [UInt64] = []
        var recordLatency = false
        var epoch: UInt64 = 0
        /// Each message's topic, `"packet_id"` (a frame counter) and time of receipt, while recording arrivals.
        var arrivals: [Arrival]?
    }

    /// A message received: its topic's last level, its `"packet_id"` and when it arrived
    /// (`EventLoop.now()`).
    struct Arrival {
        var device: Substring
        var counter: UInt64
        var at: UInt64
    }
    private let box = Locked(State())
    let loop: EventLoop
    let client: MQTTClient
    private let consumer: Task<Void, Never>

    /// Subscribes to `filter` on `broker` (at `qos`, so a QoS 1 pipeline stays QoS 1 to here).
    init(brokerPort: UInt16, filter: String, qos: MQTTQoS, name: String) async throws {
        loop = EventLoop(name: "bench-sub-\(name)")
        var configuration = try MQTTConfiguration(
            url: "mqtt://127.0.0.1:\(brokerPort)", clientID: "bench-sub-\(name)-\(getpid())")
        configuration.protocolVersion = .v311
        client = try MQTTClient(configuration: configuration, loop: loop)
        try await client.connect()
        let subscription = try await client.subscribe(to: try MQTTTopicFilter(filter), qos: qos)
        consumer = Task { [box] in
            for await message in subscription {
                let now = EventLoop.now()
                var stamp: UInt64? = nil
                let (recording, arriving) = box.value.withLock { ($0.recordLatency, $0.arrivals != nil) }
                if recording { stamp = Self.counterField(message.payload) }
                let frame = arriving ? Self.numberField(message.payload, key: #""packet_id":"#) : nil
                box.value.withLock {
                    if let frame, $0.arrivals != nil {
                        let device = message.topic.split(separator: "/").last ?? ""
                        $0.arrivals?.append(Arrival(device: device, counter: frame, at: now))
                    }
                    $0.count += 1
                    if $0.first == 0 { $0.first = now }
                    $0.last = now
                    if let stamp, $0.recordLatency {
                        // The emit time is microseconds since `epoch` (u32, wraps after 71 min).
                        let receivedMicros = (now - $0.epoch) / 1000
                        $0.latencies.append(receivedMicros &- stamp)
                    }
                }
            }
        }
    }

    /// (count, first receipt, last receipt) since the last reset.
    var snapshot: (count: Int, first: UInt64, last: UInt64) { box.value.withLock { ($0.count, $0.first, $0.last) } }

    func reset() {
        box.value.withLock {
            $0.count = 0
            $0.first = 0
            $0.last = 0
            $0.latencies = []
        }
    }

    /// From now on, each message's `"counter"` is taken as an emit time in µs since `epoch`.
    func recordLatency(epoch: UInt64) {
        box.value.withLock {
            $0.epoch = epoch
            $0.recordLatency = true
            $0.latencies.reserveCapacity(40_000)
        }
    }

    var latencies: [UInt64] { box.value.withLock { $0.latencies } }

    /// Keeps every message's ``Arrival`` from now on.
    func startArrivals() {
        box.value.withLock { $0.arrivals = [] }
    }

    /// The arrivals since ``startArrivals()``; stops keeping them.
    func stopArrivals() -> [Arrival] {
        box.value.withLock { state in
            defer { state.arrivals = nil }
            return state.arrivals ?? []
        }
    }

    /// Waits until `count` messages arrived or none arrived for `quiet` seconds (or `timeout`).
    func waitFor(count: Int, quiet: Double = 2, timeout: Double = 120) async -> Int {
        let deadline = Date().addingTimeInterval(timeout)
        var seen = -1
        var since = Date()
        while Date() < deadline {
            let now = snapshot.count
            if now >= count { return now }
            if now != seen {
                seen = now
                since = Date()
            } else if Date().timeIntervalSince(since) > quiet {
                return now
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return snapshot.count
    }

    func close() async {
        consumer.cancel()
        await client.disconnect()
        loop.shutdown()
    }

    /// The integer after `"counter":` in a JSON payload, without a JSON parser.
    static func counterField(_ payload: [UInt8]) -> UInt64? {
        numberField(payload, key: #""counter":"#)
    }

    /// The integer after `key` (e.g. `"packet_id":`) in a JSON payload, without a JSON parser.
    static func numberField(_ payload: [UInt8], key text: String) -> UInt64? {
        let key = Array(text.utf8)
        guard payload.count > key.count else { return nil }
        var i = 0
        while i + key.count <= payload.count {
            if payload[i] == key[0] && Array(payload[i..<(i + key.count)]) == key {
                var j = i + key.count
                var value: UInt64 = 0
                var digits = 0
                while j < payload.count, payload[j] >= 48, payload[j] <= 57 {
                    value = value * 10 + UInt64(payload[j] - 48)
                    j += 1
                    digits += 1
                }
                return digits > 0 ? value : nil
            }
            i += 1
        }
        return nil
    }
}

/// One private world: a dbus-daemon with the BlueZ simulator (in this process, on its own loop
/// thread) owning `org.bluez` on it.
final class SimulatedWorld {
    let daemon: DBusDaemon
    let loop: EventLoop
    let simulator: BlueZSimulator

    convenience init(scenario: String) async throws {
        try await self.init(scenario: try Scenario.parse(Data(scenario.utf8)))
    }

    init(scenario: Scenario) async throws {
        daemon = try await DBusDaemon()
        loop = EventLoop(name: "bench-simulator")
        simulator = try await BlueZSimulator.start(scenario: scenario, bus: .address(daemon.address), on: loop)
    }

    func stop() async {
        await simulator.stop()
        loop.shutdown()
        daemon.stop()
    }
}

/// A program under test (gattway or a peer) as a child process on the world's bus.
final class GatewayProcess {
    let child: ChildProcess
    let name: String

    init(
        name: String, executable: String, arguments: [String], world: SimulatedWorld,
        extraEnvironment: [String: String] = [:]
    ) throws {
        self.name = name
        var environment = world.daemon.environment
        for (key, value) in extraEnvironment { environment[key] = value }
        child = try ChildProcess(executable, arguments, environment: environment)
    }

    /// `gattway run --config FILE --state-dir DIR` with `config` (JSON text) written to a
    /// temporary directory that is also the state directory (the store-and-forward queue is a
    /// file there, as under the systemd unit). `executable` is another gattway binary to run
    /// instead of the one built next to gattway-bench (the realistic phase's baseline).
    static func gattway(
        config: String, world: SimulatedWorld, logLevel: String = "notice", executable other: String? = nil
    ) async throws -> GatewayProcess {
        let dir = try TemporaryDirectory.make(prefix: "bench-gattway")
        let path = dir.appendingPathComponent("config.json").path
        try config.write(toFile: path, atomically: true, encoding: .utf8)
        var executable = try other ?? BuiltProduct.path("gattway")
        var arguments = ["run", "--config", path, "--state-dir", dir.path, "--log-level", logLevel]
        // BENCH_MASSIF=FILE runs gattway under valgrind's massif (heap profile to FILE, read with
        // ms_print) to find what the memory figures consist of; far too slow for the rate figures.
        if let massif = ProcessInfo.processInfo.environment["BENCH_MASSIF"], !massif.isEmpty {
            arguments = ["--tool=massif", "--massif-out-file=\(massif)", executable] + arguments
            executable = "/usr/bin/valgrind"
        }
        // BENCH_HEAPTRACK=FILE preloads heaptrack's library into gattway itself (so the samples
        // stay gattway's): raw data to FILE, then `heaptrack_interpret < FILE | gzip > FILE.gz` and
        // `heaptrack_print -f FILE.gz` (-M writes massif snapshots: the heap over time). About 1.5×
        // the CPU per message at the soak's rates (RELIABILITY.md).
        var environment: [String: String] = [:]
        if let heaptrack = ProcessInfo.processInfo.environment["BENCH_HEAPTRACK"], !heaptrack.isEmpty {
            environment["LD_PRELOAD"] = "/usr/lib/heaptrack/libheaptrack_preload.so"
            environment["DUMP_HEAPTRACK_OUTPUT"] = heaptrack
        }
        let process = try GatewayProcess(
            name: "gattway", executable: executable, arguments: arguments, world: world,
            extraEnvironment: environment)
        try await process.child.waitForOutput(containing: "gateway started", timeout: 60)
        return process
    }

    var sample: ProcessSample {
        get throws {
            guard let sample = ProcessSample.read(child.pid) else {
                throw BenchError(
                    "\(name) is not running (status \(child.terminationStatus)):\n\(child.log().suffix(2000))")
            }
            return sample
        }
    }

    func stop() { child.stop(grace: 5) }
}

/// What a phase measured of one process: CPU seconds used and RSS.
struct PhaseUsage {
    var cpuSeconds: Double
    var rssStart: Int
    var rssEnd: Int
    var rssPeak: Int

    /// Measures `body` on `process`: CPU from /proc before and after, RSS sampled every 100 ms.
    static func measure<T>(_ process: GatewayProcess, _ body: () async throws -> T) async throws -> (PhaseUsage, T) {
        let before = try process.sample
        let sampler = RSSSampler(pid: process.child.pid)
        defer { sampler.stop() }
        let result = try await body()
        let after = try process.sample
        return (
            PhaseUsage(
                cpuSeconds: after.cpuSeconds - before.cpuSeconds, rssStart: before.rss, rssEnd: after.rss,
                rssPeak: max(sampler.peak, after.rss, before.rss)),
            result
        )
    }
}

extension Int {
    var megabytes: Double { Double(self) / 1_048_576 }
}

extension Double {
    func formatted(_ digits: Int) -> String { String(format: "%.\(digits)f", self) }
}

/// The load average, to note with the results (the machine is shared).
func loadAverage() -> String {
    ((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "?").split(separator: " ").prefix(3).joined(
        separator: " ")
}

/// A `Mutex` in a class, so closures and tasks can capture it.
final class Locked<Value: Sendable>: Sendable {
    let value: Mutex<Value>
    init(_ value: Value) { self.value = Mutex(value) }
}
