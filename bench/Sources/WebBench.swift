import BlueZSimulator
import Foundation
import Subprocess
import TestSupport

/// `gattway-bench run web`: what the open web page costs the gateway (issue 32, item 7), in one
/// gattway process, so that nothing but the page differs between the figures: 50 ATC1441
/// thermometers at random phases, 1,000 advertisements a second in total, through gattway with the
/// web server on; after a warm-up, windows of 10 s alternate between nobody looking and the page
/// open on its device list (``WebPageClient``: the event stream, the list every 10 s, `/metrics`
/// every 5 s), three of each, then three with the page on the radio view (every 2 s; the core's
/// radio view listens from the first and for a minute after the last, so these come last). CPU per
/// published message in each window from the process's threads' on-CPU time; each kind's median.
///
/// Measuring windows of one process, not one gattway after another, takes away what differed
/// between processes (a fresh simulator, the moment, the position in the run), which moved
/// `realistic`'s rows by up to 25 % between runs on the shared machine.
enum WebBench: BenchSuite {
    static let name = "web"
    static let onlyWhenNamed = false
    static let advertisers = 50
    static let rate = 1_000.0
    static let window = 10.0
    static let rounds = 3

    enum Kind: String, CaseIterable {
        case closed = "nobody looking"
        case devices = "page open, device list"
        case radio = "page open, radio view"
    }

    static func run() async throws -> [BenchRow] {
        let broker = try await MosquittoBroker()
        defer { broker.stop() }
        let world = try await SimulatedWorld(scenario: GatewayBench.emptyScenario)
        let subscriber = try await CountingSubscriber(
            brokerPort: broker.port, filter: "gattway/+", qos: .atMostOnce, name: "web-bench")
        let port = try LoopbackPort.free()
        let config = GatewayBench.advertisementConfig(
            port: broker.port, maxDevices: 1_000, reportBatch: "100ms", web: WebPageClient.config(port: port))
        let gattway = try await GatewayProcess.gattway(config: config, world: world)
        defer { gattway.stop() }
        let load = loadAverage()
        try await world.simulator.addATCAdvertisers(
            count: advertisers, interval: advertisingInterval(advertisers: advertisers, rate: rate), aligned: false)
        try await Task.sleep(for: .seconds(5))

        var figures: [Kind: [Double]] = [:]
        var requests = 0
        var failures = 0
        func measure(_ kind: Kind) async throws {
            var page: WebPageClient?
            if kind != .closed {
                let client = WebPageClient(port: port, view: kind == .radio ? .radio : .devices)
                try client.start()
                page = client
            }
            let delivered0 = subscriber.snapshot.count
            let cpu0 = ProcessThreads.onCPUNanoseconds(gattway.child.pid)
            try await Task.sleep(for: .seconds(window))
            let nanoseconds = ProcessThreads.onCPUNanoseconds(
                from: cpu0, to: ProcessThreads.onCPUNanoseconds(gattway.child.pid))
            let delivered = subscriber.snapshot.count - delivered0
            if let page {
                let result = page.stop()
                requests += result.requests
                failures += result.failures
            }
            guard delivered > 0 else { throw BenchError("web: no message in a \(kind.rawValue) window") }
            let micros = Double(nanoseconds) / 1000 / Double(delivered)
            figures[kind, default: []].append(micros)
            FileHandle.standardError.write(
                Data("web: \(kind.rawValue): \(micros.formatted(2)) CPU µs per message (\(delivered) messages)\n".utf8))
        }
        for _ in 0..<rounds {
            try await measure(.closed)
            try await measure(.devices)
        }
        for _ in 0..<rounds { try await measure(.radio) }

        func median(_ values: [Double]) -> Double {
            let sorted = values.sorted()
            return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
        }
        let closed = median(figures[.closed] ?? [])
        var rows: [BenchRow] = [
            BenchRow(
                name: "web: setup", value: rate, unit: "adv/s",
                detail: "\(advertisers) ATC1441 at random phases, report_batch 100ms, one gattway; "
                    + "\(rounds) windows of \(Int(window)) s per kind; the page made \(requests) requests, "
                    + "\(failures) not answered 200; load \(load) at start, \(loadAverage()) at the end")
        ]
        for kind in Kind.allCases {
            let values = figures[kind] ?? []
            rows.append(
                BenchRow(
                    name: "web: CPU per msg, \(kind.rawValue)", value: median(values), unit: "CPU µs",
                    detail: "median of " + values.map { $0.formatted(2) }.joined(separator: ", ")))
        }
        for kind in [Kind.devices, .radio] where closed > 0 {
            rows.append(
                BenchRow(
                    name: "web: CPU per msg, \(kind.rawValue) / nobody looking",
                    value: median(figures[kind] ?? []) / closed, unit: "×", target: "≤ 1.05"))
        }
        subscriber.reset()
        await subscriber.close()
        await world.stop()
        return rows
    }
}
