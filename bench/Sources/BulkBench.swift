import BlueZSimulator
import Bluetooth
import EventLoop
import Foundation
import Subprocess
import TestSupport

/// `gattway-bench run bulk` (issue #31 item 6): bulk transfers through the Bluetooth proxy — a
/// firmware update's 100 KiB of writes without response, and 100 KiB with response — against the
/// same simulated device driven by bleak directly on BlueZ, in one run.
///
/// One world: the simulator with the link model (docs/simulator.md "The link's throughput": ATT
/// MTU 247, a 15 ms connection interval, 4 packets per event: 65 kB/s for write commands; a
/// write request's response in the next event) and a device with characteristic ff10 (write,
/// write-without-response); 100 advertisers with the simulator's monotonic stamp and 200 mixed
/// sensors, each with its own interval (0.9–1.1 s, so their phases drift as a radio's do) — about
/// 300 adv/s; `gattway run` with the proxy (Noise) and the MQTT gateway publishing every device; a
/// Noise client of the bench subscribed to advertisements throughout (the second client).
/// `report_batch` is 0: by default reports wait up to 100 ms to be read in batches (half of that
/// at the median), except while a call of gattway's waits for bluetoothd's reply (a write
/// request): then they are read as they come, and the advertisements would look faster during a
/// transfer than without one.
///
/// Phases (after 10 s of warm-up): 15 s without a transfer; bleak on BlueZ (.venv, the
/// conformance lane's bleak): 100 KiB command, 100 KiB request; bleak-esphome through gattway
/// (.venv-esphome, habluetooth's manager as Home Assistant): the same; then the device turns slow
/// (`gatt_latency` 250 ms) and bleak-esphome writes with response for 20 s; 15 s without a
/// transfer again. A transfer's time runs from the client's first write call to the device's
/// receipt of the last byte (the simulator's record), and every byte is checked (count and an
/// order-sensitive checksum). gattway's RSS is sampled every 20 ms during the proxy's transfers.
/// The latency of each stamped advertisement to the watching client (its receipt − the stamp) is
/// put in the phase its stamp falls in.
enum BulkBench: BenchSuite {
    static let name = "bulk"
    static let size = 100 * 1024
    static let device = "C0:FF:EE:00:00:01"
    static let stamped = 100
    static let sensors = 200
    static let key = ESPHomeBench.key
    static let idleSeconds = 15.0
    static let slowSeconds = 20.0
    static let slowLatency = 0.25

    /// The bytes a transfer writes (bench/bulk_transfer.py `pattern`).
    static func pattern(_ count: Int) -> [UInt8] { (0..<count).map { UInt8(($0 &* 131 &+ ($0 >> 8)) & 0xFF) } }

    static var scenario: String {
        var devices = [
            #"{"address": "\#(device)", "name": "Bulk", "interval": "100ms", "service_uuids": ["fe59"], "#
                + #""gatt": [{"uuid": "fe59", "characteristics": [{"uuid": "ff10", "flags": ["write", "write-without-response"]}]}]}"#
        ]
        for index in 0..<(stamped + sensors) {
            let interval = 0.9 + 0.2 * Double(index) / Double(stamped + sensors - 1)
            let address = GatewayBench.advertiserAddress(index)
            devices.append(
                index < stamped
                    ? #"{"address": "\#(address)", "interval": \#(interval), "connectable": false, "manufacturer_data": {"0xFFFF": {"template": "monotonic_stamp"}}}"#
                    : GatewayBench.advertiserJSON(address: address, index: index, interval: interval))
        }
        return
            #"{"timing": {"disconnect_delay": "100ms", "resolve_delay": "50ms", "gatt_latency": 0, "temporary_timeout": "1h", "#
            + #""mtu": 247, "connection_interval": "15ms", "packets_per_event": 4}, "devices": [\#(devices.joined(separator: ",\n"))]}"#
    }

    /// One transfer as measured.
    struct Transfer {
        var label: String
        var start: UInt64 = 0
        var end: UInt64 = 0
        var bytes = 0
        var expected = 0
        var intact = false
        var seconds: Double { Double(end &- start) / 1e9 }
        var throughput: Double { seconds > 0 ? Double(bytes) / seconds / 1024 : 0 }
    }

    static func run() async throws -> [BenchRow] {
        let here = FileManager.default.currentDirectoryPath
        let environment = ProcessInfo.processInfo.environment
        let direct = environment["BENCH_BLEAK_PYTHON"] ?? here + "/.venv/bin/python"
        let proxy = environment["BENCH_ESPHOME_PYTHON"] ?? here + "/.venv-esphome/bin/python"
        guard FileManager.default.isExecutableFile(atPath: direct), FileManager.default.isExecutableFile(atPath: proxy)
        else {
            return [
                BenchRow(
                    name: "bulk: not measured", value: .nan, unit: "",
                    detail: "needs .venv (bleak) and .venv-esphome (bleak-esphome): make bench makes them")
            ]
        }
        let broker = try await MosquittoBroker()
        defer { broker.stop() }
        FileHandle.standardError.write(Data("bulk: load average \(loadAverage()) at start\n".utf8))
        let world = try await SimulatedWorld(scenario: scenario)
        let apiPort = try LoopbackPort.free()
        let config = ESPHomeBench.proxyConfig(
            brokerPort: broker.port, apiPort: apiPort, bluetooth: #""max_devices": 2000, "report_batch": "0ms""#)
        let gattway = try await GatewayProcess.gattway(config: config, world: world)
        defer { gattway.stop() }
        let watcher = try BenchAPIClient(port: apiPort, psk: key)
        defer { watcher.close() }
        let goDirectory = try TemporaryDirectory.make(prefix: "bench-bulk")
        // Warm-up: every advertiser found and published once, the first round of each device's
        // MQTT messages sent.
        try await Task.sleep(for: .seconds(10))
        watcher.reset()
        let load = loadAverage()
        let rssIdle = (try? gattway.sample.rss) ?? 0

        var windows: [(label: String, start: UInt64, end: UInt64)] = []
        let idleStart = EventLoop.now()
        try await Task.sleep(for: .seconds(idleSeconds))
        windows.append(("no transfer (before)", idleStart, EventLoop.now()))

        FileHandle.standardError.write(Data("bulk: bleak on BlueZ\n".utf8))
        let kinds = "command:\(size),request:\(size)"
        let directTransfers = try await transfers(
            python: direct, arguments: ["direct", device, goDirectory.path + "/direct", kinds], world: world)
        FileHandle.standardError.write(Data("bulk: bleak-esphome through gattway\n".utf8))
        let sampler = RSSSampler(pid: gattway.child.pid, interval: .milliseconds(20))
        let proxyTransfers = try await transfers(
            python: proxy,
            arguments: [
                "proxy", device, goDirectory.path + "/proxy", kinds, String(apiPort), Data(key).base64EncodedString(),
            ], world: world)
        sampler.stop()
        let rssPeak = sampler.peak
        for transfer in proxyTransfers { windows.append((transfer.label, transfer.start, transfer.end)) }

        FileHandle.standardError.write(Data("bulk: a slow device through gattway\n".utf8))
        var timing = await world.simulator.currentTiming
        timing.gattLatency = slowLatency
        await world.simulator.setTiming(timing)
        let slowTransfers = try await transfers(
            python: proxy,
            arguments: [
                "proxy", device, goDirectory.path + "/slow", "slow:\(Int(slowSeconds))", String(apiPort),
                Data(key).base64EncodedString(),
            ], world: world)
        for transfer in slowTransfers { windows.append((transfer.label, transfer.start, transfer.end)) }
        let afterStart = EventLoop.now()
        try await Task.sleep(for: .seconds(idleSeconds))
        windows.append(("no transfer (after)", afterStart, EventLoop.now()))
        let samples = watcher.snapshot.latencies
        let hwm = (try? gattway.sample.peakRSS) ?? 0
        await world.stop()

        var rows = [
            BenchRow(
                name: "bulk: setup", value: Double(size) / 1024, unit: "KiB per transfer",
                detail:
                    "simulated link: ATT MTU 247, 15 ms connection interval, 4 packets per event (65 kB/s for commands, "
                    + "a request's response in the next event); 244-byte writes; \(stamped) stamped advertisers and "
                    + "\(sensors) sensors at 0.9–1.1 s; load \(load) at start")
        ]
        for (index, kind) in ["without response", "with response"].enumerated() {
            guard index < directTransfers.count, index < proxyTransfers.count else { continue }
            let bleak = directTransfers[index]
            let through = proxyTransfers[index]
            rows.append(
                BenchRow(
                    name: "bulk: 100 KiB \(kind), bleak on BlueZ", value: bleak.throughput, unit: "KiB/s",
                    detail: "\(bleak.seconds.formatted(2)) s, \(bleak.bytes) of \(bleak.expected) bytes"
                        + (bleak.intact ? ", intact" : ", NOT INTACT")))
            rows.append(
                BenchRow(
                    name: "bulk: 100 KiB \(kind), bleak-esphome through gattway", value: through.throughput,
                    unit: "KiB/s",
                    detail: "\(through.seconds.formatted(2)) s, \(through.bytes) of \(through.expected) bytes"
                        + (through.intact ? ", intact" : ", NOT INTACT")))
            rows.append(
                BenchRow(
                    name: "bulk: \(kind), gattway ÷ bleak on BlueZ",
                    value: bleak.throughput > 0 ? through.throughput / bleak.throughput * 100 : .nan, unit: "%",
                    target: "≥ 80"))
        }
        if let slow = slowTransfers.first {
            rows.append(
                BenchRow(
                    name:
                        "bulk: slow device (responses after \(Int(slowLatency * 1000)) ms), with response through gattway",
                    value: slow.throughput, unit: "KiB/s",
                    detail: "\(slow.bytes) bytes in \(slow.seconds.formatted(1)) s"
                        + (slow.intact ? ", intact" : ", NOT INTACT")
                ))
        }
        rows.append(
            BenchRow(
                name: "bulk: gattway RSS peak during the proxy's transfers", value: rssPeak.megabytes, unit: "MB",
                detail:
                    "VmRSS every 20 ms; \(rssIdle.megabytes.formatted(1)) MB before the transfers, VmHWM \(hwm.megabytes.formatted(1)) MB at the end"
            ))
        for window in windows {
            let latencies = samples.filter { $0.stamp >= window.start && $0.stamp <= window.end }.map { $0.latency }
                .sorted()
            rows.append(
                BenchRow(
                    name: "bulk: advertisement to the second client p50, \(window.label)",
                    value: percentile(0.5, latencies), unit: "ms",
                    detail:
                        "\(latencies.count) stamped advertisements in \((Double(window.end &- window.start) / 1e9).formatted(1)) s"
                ))
            rows.append(
                BenchRow(
                    name: "bulk: advertisement to the second client p99, \(window.label)",
                    value: percentile(0.99, latencies), unit: "ms"))
        }
        return rows
    }

    static func percentile(_ p: Double, _ sorted: [UInt64]) -> Double {
        guard !sorted.isEmpty else { return .nan }
        return Double(sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * p).rounded()))]) / 1e6
    }

    /// Runs bench/bulk_transfer.py and measures each of its transfers on the simulator's side.
    static func transfers(python: String, arguments: [String], world: SimulatedWorld) async throws -> [Transfer] {
        let goDirectory = arguments[2]
        try FileManager.default.createDirectory(atPath: goDirectory, withIntermediateDirectories: true)
        await world.simulator.clearRecordedWrites()
        let child = try ChildProcess(
            python, [FileManager.default.currentDirectoryPath + "/bench/bulk_transfer.py"] + arguments,
            environment: world.daemon.environment)
        defer { child.stop() }
        let address = BluetoothAddress(device)!
        let uuid = BluetoothUUID("ff10")!
        var results: [Transfer] = []
        for item in arguments[3].split(separator: ",") {
            let kind = String(item.split(separator: ":")[0])
            let label =
                kind == "command"
                ? "100 KiB without response" : kind == "request" ? "100 KiB with response" : "slow device"
            var transfer = Transfer(
                label: (arguments[0] == "direct" ? "bleak on BlueZ, " : "through gattway, ") + label)
            transfer.start = UInt64(integer(try await event(child, "start", kind)["at"]) ?? 0)
            // Until every byte arrived, or the client is done and nothing more arrives for 3 s.
            var sent: Int?
            var lastProgress = EventLoop.now()
            var received = ReceivedBytes()
            while true {
                let now = await world.simulator.received(device: address, uuid: uuid)
                if now.bytes != received.bytes { lastProgress = EventLoop.now() }
                received = now
                if sent == nil,
                    let line = try? lines(child).first(where: {
                        $0["event"] as? String == "sent" && $0["kind"] as? String == kind
                    })
                {
                    sent = integer(line["bytes"])
                }
                if let sent, received.bytes >= sent { break }
                if sent != nil, EventLoop.now() - lastProgress > 3_000_000_000 { break }
                guard child.isRunning else { throw BenchError("bulk_transfer.py ended: \(child.log().suffix(2_000))") }
                guard EventLoop.now() - transfer.start < 600_000_000_000 else {
                    throw BenchError("bulk: a transfer took 10 minutes")
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            transfer.expected = sent ?? 0
            transfer.bytes = received.bytes
            transfer.intact =
                received.bytes == transfer.expected
                && received.checksum == ReceivedBytes.checksum(of: pattern(transfer.expected))
            transfer.end = world.simulator.startTime + UInt64((received.last ?? 0) * 1e9)
            results.append(transfer)
            await world.simulator.clearRecordedWrites()
            _ = FileManager.default.createFile(atPath: goDirectory + "/" + kind, contents: nil)
        }
        _ = try await event(child, "done", nil)
        return results
    }

    /// A JSON number as JSONSerialization gives it (Int or NSNumber).
    static func integer(_ value: Any?) -> Int? {
        if let value = value as? Int { return value }
        return (value as? NSNumber)?.intValue
    }

    /// The JSON lines bulk_transfer.py printed so far.
    static func lines(_ child: ChildProcess) throws -> [[String: Any]] {
        child.log().split(separator: "\n").compactMap { line in
            guard line.hasPrefix("{") else { return nil }
            return try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        }
    }

    /// Waits for bulk_transfer.py's line with `event` (and `kind`).
    static func event(_ child: ChildProcess, _ event: String, _ kind: String?) async throws -> [String: Any] {
        let deadline = EventLoop.now() + 120_000_000_000
        while EventLoop.now() < deadline {
            if let line = try lines(child).first(where: {
                $0["event"] as? String == event && (kind == nil || $0["kind"] as? String == kind)
            }) {
                return line
            }
            guard child.isRunning else { throw BenchError("bulk_transfer.py ended: \(child.log().suffix(2_000))") }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw BenchError(
            "bulk_transfer.py did not say \(event) \(kind ?? "") in 2 minutes: \(child.log().suffix(2_000))")
    }
}
