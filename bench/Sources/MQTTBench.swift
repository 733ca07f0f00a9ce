import EventLoop
import Foundation
import MQTT
import Synchronization
import TestSupport

/// Publishes/s of the `MQTT` client to a private local mosquitto it starts itself
/// (`gattway-bench run mqtt`). Publishes are submitted on the loop thread (as the gateway does)
/// and counted when the client reports them complete: QoS 0 written, QoS 1 PUBACKed.
enum MQTTBench: BenchSuite {
    static var name: String { "mqtt" }

    static func run() async throws -> [BenchRow] {
        let broker = try await MosquittoBroker()
        defer { broker.stop() }
        let loop = EventLoop(name: "bench-mqtt")
        defer { loop.shutdown() }
        var rows: [BenchRow] = []
        let cases: [(MQTTQoS, Int, String)] = [(.atMostOnce, 500_000, "≥ 250000"), (.atLeastOnce, 200_000, "≥ 70000")]
        for (qos, count, target) in cases {
            var configuration = try MQTTConfiguration(
                url: "mqtt://127.0.0.1:\(broker.port)", clientID: "bench-\(qos.rawValue)")
            configuration.maxInflight = 1000
            configuration.maxQueued = count  // the whole burst is published without waiting
            configuration.protocolVersion = .v311
            let client = try MQTTClient(configuration: configuration, loop: loop)
            try await client.connect()
            // 58 bytes, a typical state message.
            let payload = Array(#"{"temperature":21.5,"humidity":48,"battery":97,"rssi":-67}"#.utf8)
            let seconds = try await measure(client: client, loop: loop, qos: qos, count: count, payload: payload)
            await client.disconnect()
            rows.append(
                BenchRow(
                    name: "MQTT publishes, \(qos), to local mosquitto", value: Double(count) / seconds, unit: "msgs/s",
                    target: target,
                    detail:
                        "\(count) × \(payload.count) B, counted on completion\(qos == .atMostOnce ? " (written)" : " (PUBACK)"), max in-flight 1000, MQTT 3.1.1"
                ))
        }
        return rows
    }

    /// Seconds until `count` publishes of `payload` at `qos` completed (submitted on the loop thread).
    static func measure(client: MQTTClient, loop: EventLoop, qos: MQTTQoS, count: Int, payload: [UInt8]) async throws
        -> Double
    {
        let tally = Tally()
        let start = EventLoop.now()
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            loop.execute {
                let message = MQTTMessage(topic: "bench/qos\(qos.rawValue)", payload: payload, qos: qos)
                for _ in 0..<count {
                    client.publish(message) { result in
                        if tally.record(failed: (try? result.get()) == nil) == count {
                            continuation.resume()
                        }
                    }
                }
            }
        }
        let seconds = Double(EventLoop.now() - start) / 1e9
        let failures = tally.failures
        if failures > 0 { throw BenchError("\(failures) of \(count) \(qos) publishes failed") }
        return seconds
    }
}

/// Completion counts shared with the loop thread.
private final class Tally: Sendable {
    private let counts = Mutex<(done: Int, failed: Int)>((0, 0))
    /// Counts one completion; returns how many completed so far.
    func record(failed: Bool) -> Int {
        counts.withLock {
            $0.done += 1
            if failed { $0.failed += 1 }
            return $0.done
        }
    }
    var failures: Int { counts.withLock { $0.failed } }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
