import Foundation
import TestSupport

/// `gattway-bench run radio`: both advertisement paths (`bluetooth.radio` "dbus" and "mgmt") on the
/// real kernel and the real bluetoothd, in the real-BlueZ VM (Tests/RealBlueZ/README.md, "The
/// virtual radio"): one VM boot runs Tests/RealBlueZ/guest-radio-modes.sh, which runs
/// guest-radio.sh for each rate (100 and 1,000 reports/s of 10 devices at random phases) and each
/// path — D-Bus and management, both scanning actively, then the management path in passive
/// mode — and emits from the virtual radio for a fixed window and counts reports sent, delivered (btmon) and reached MQTT, the CPU time of
/// gattway, bluetoothd and dbus-daemon over the window (/proc in the guest) and the report-to-MQTT
/// latency (the radio's send time against mosquitto_sub's receive time, one guest clock).
/// bluetoothd runs without -d (its debug log of every report would be what is measured).
///
/// The guest is emulated (TCG): absolute CPU times are many times a real machine's; the ratios of
/// the paths are the result. One VM boot of several minutes (about 1.5 minutes per path and
/// rate after the boot).
///
/// Environment: BENCH_RADIO_RATES (default "100 1000"), BENCH_RADIO_SECONDS (window, default 20),
/// BENCH_RADIO_DEVICES (default 10), REALBLUEZ_TIMEOUT (the VM's wall-clock limit).
enum RadioBench: BenchSuite {
    static let name = "radio"
    /// The runs per rate, by their directory's tag: the D-Bus path, the management path (active,
    /// as the D-Bus path), the management path in passive mode.
    static let paths = ["dbus", "mgmt", "mgmt-passive"]

    /// What vhci-count.py wrote for one path and rate (figures.json).
    struct Figures: Decodable {
        var rate: Double
        var emitted: Int
        var delivered: Int
        var reached_mqtt: Int
        var percent: Double
        var btmon_drops: Int
        var mqtt_mismatches: Int
        var latency_reports: Int
        var latency_p50_ms: Double?
        var latency_p99_ms: Double?
        var cpu_seconds: [String: Double]
        var cpu_us_per_delivered: [String: Double?]
    }

    static func run() async throws -> [BenchRow] {
        let environment = ProcessInfo.processInfo.environment
        let rates = (environment["BENCH_RADIO_RATES"] ?? "100 1000").split(separator: " ").map(String.init)
        let seconds = environment["BENCH_RADIO_SECONDS"] ?? "20"
        let devices = environment["BENCH_RADIO_DEVICES"] ?? "10"
        let root = FileManager.default.currentDirectoryPath
        let lane = root + "/Tests/RealBlueZ"
        guard FileManager.default.isExecutableFile(atPath: lane + "/run-vm.sh") else {
            throw BenchError("radio: run from the repository's root (no \(lane)/run-vm.sh)")
        }
        let binDirectory = URL(fileURLWithPath: try BuiltProduct.path("gattway")).deletingLastPathComponent().path
        let runDirectory = root + "/.build/realbluez/runs/bench-radio"

        guard try run(lane + "/build-vm.sh", [], environment: [:]) == 0 else {
            throw BenchError("radio: Tests/RealBlueZ/build-vm.sh failed")
        }
        let status = try run(
            lane + "/run-vm.sh", [lane + "/guest-radio-modes.sh", binDirectory],
            environment: [
                "BLUETOOTHD_ARGS": "-P battery", "REALBLUEZ_RUN": runDirectory, "REALBLUEZ_QUIET": "1",
                "RBZ_RADIO_RATES": rates.joined(separator: " "),
                "RBZ_RADIO_SECONDS": seconds, "RBZ_RADIO_DEVICES": devices,
                // Six runs of about 1.5 minutes each after the boot.
                "REALBLUEZ_TIMEOUT": environment["REALBLUEZ_TIMEOUT"] ?? "1800",
            ])
        let console = (try? String(contentsOfFile: runDirectory + "/console.log", encoding: .utf8)) ?? ""
        for line in console.split(separator: "\n") where line.hasPrefix("[radio") || line.hasPrefix("FAIL") {
            FileHandle.standardError.write(Data("  \(line)\n".utf8))
        }

        var rows: [BenchRow] = []
        let conditions =
            "\(devices) devices, \(seconds) s window, guest under TCG (absolute CPU inflated; compare paths), "
            + "bluetoothd -P battery, VM status \(status), load \(loadAverage())"
        for rate in rates {
            var byPath: [String: Figures] = [:]
            for path in paths {
                let file = "\(runDirectory)/out/radio/\(path)-\(rate)/figures.json"
                // A run that produced no figures (the VM's limit, a hang) is a row saying so; the
                // others are still written.
                guard let data = FileManager.default.contents(atPath: file) else {
                    rows.append(
                        BenchRow(
                            name: "radio \(path) \(rate)/s: no figures", value: 0, unit: "-",
                            detail: "no \(file) (VM status \(status); see \(runDirectory)/console.log)"))
                    continue
                }
                let figures = try JSONDecoder().decode(Figures.self, from: data)
                byPath[path] = figures
                rows += pathRows(path: path, rate: rate, figures, conditions: conditions)
            }
            guard let dbus = byPath["dbus"] else { continue }
            for path in paths.dropFirst() {
                guard let other = byPath[path] else { continue }
                rows += ratioRows(path, rate: rate, other, dbus)
            }
        }
        return rows
    }

    /// CPU per report of run `path` against the D-Bus path's at `rate`: the whole system's and
    /// gattway's, per delivered report (btmon's count) and per sent report (the radio's: btmon
    /// falls behind on a starved guest, and then the first undercounts).
    static func ratioRows(_ path: String, rate: String, _ other: Figures, _ dbus: Figures) -> [BenchRow] {
        func perDelivered(_ f: Figures, _ key: String) -> Double? { f.cpu_us_per_delivered[key] ?? nil }
        func perSent(_ f: Figures, _ key: String) -> Double? {
            f.emitted > 0 ? f.cpu_seconds[key].map { $0 * 1e6 / Double(f.emitted) } : nil
        }
        var rows: [BenchRow] = []
        for (per, measure) in [("delivered", perDelivered), ("sent", perSent)] {
            for (key, label, target) in [("system", "whole-system", "≤ 0.5"), ("gattway", "gattway", "< 1")] {
                guard let m = measure(other, key), let d = measure(dbus, key), d > 0 else { continue }
                rows.append(
                    BenchRow(
                        name: "radio \(rate)/s: \(label) CPU per \(per) report, \(path) ÷ dbus", value: m / d,
                        unit: "×", target: target,
                        detail: "\(m.formatted(0)) µs vs \(d.formatted(0)) µs per \(per) report"))
            }
        }
        return rows
    }

    static func pathRows(path: String, rate: String, _ f: Figures, conditions: String) -> [BenchRow] {
        let prefix = "radio \(path) \(rate)/s"
        let cpu = ["gattway", "bluetoothd", "dbus-daemon"].map { key in
            "\(key) \((f.cpu_seconds[key] ?? 0).formatted(2)) s"
        }.joined(separator: ", ")
        var rows = [
            BenchRow(
                name: "\(prefix): reached MQTT of delivered", value: f.percent, unit: "%",
                target: path == "mgmt" ? "≥ 99" : nil,
                detail:
                    "sent \(f.emitted), delivered \(f.delivered) (btmon, \(f.btmon_drops) dropped), reached "
                    + "\(f.reached_mqtt), \(f.mqtt_mismatches) mismatched; \(conditions)"),
            BenchRow(
                name: "\(prefix): CPU per report, whole system",
                value: (f.cpu_us_per_delivered["system"] ?? nil) ?? 0, unit: "µs/report",
                detail: "gattway + bluetoothd + dbus-daemon per delivered report; \(cpu) over the window"),
            BenchRow(
                name: "\(prefix): CPU per report, gattway", value: (f.cpu_us_per_delivered["gattway"] ?? nil) ?? 0,
                unit: "µs/report", detail: "per delivered report"),
        ]
        if let p50 = f.latency_p50_ms, let p99 = f.latency_p99_ms {
            rows.append(
                BenchRow(
                    name: "\(prefix): report → MQTT latency p50", value: p50, unit: "ms",
                    detail: "radio's send time to mosquitto_sub's receipt, \(f.latency_reports) reports"))
            rows.append(
                BenchRow(
                    name: "\(prefix): report → MQTT latency p99", value: p99, unit: "ms",
                    detail: "reports that reached MQTT within the window + 3 s"))
        }
        return rows
    }

    /// Runs a script with extra environment, its output passed through; returns its exit status.
    static func run(_ executable: String, _ arguments: [String], environment extra: [String: String]) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        for (key, value) in extra { environment[key] = value }
        process.environment = environment
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
    }
}
