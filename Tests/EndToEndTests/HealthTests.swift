import Foundation
import JSON
import TestSupport
import Testing

/// `gattway run`'s `<base>/bridge/health` with the demo world, as an operator reads it.
@Suite("End to end: bridge/health")
struct HealthTests {
    @Test(
        "bridge/health every interval: uptime, RSS, CPU, traffic counters, drops by reason, queue depth, connections, reconnects and the D-Bus round trip to bluetoothd"
    )
    func health() async throws {
        let config = DemoWorldConfig.text.replacingOccurrences(
            of: #""commands": {"max_payload_bytes": 256},"#,
            with: #""commands": {"max_payload_bytes": 256}, "health": {"interval": "1s"},"#)
        try await EndToEnd.run(config: config) { e2e in
            // The three connectable devices are up and notifying before the snapshot we read.
            try await e2e.messages.wait(for: "a battery and an env reading", count: 2) {
                ($0.topic == "gattway/battery_sensor" && $0.number("battery") != nil)
                    || ($0.topic == "gattway/env_sensor" && $0.number("temperature") != nil)
            }
            let mark = e2e.messages.count
            let received = try await e2e.messages.next(on: "gattway/bridge/health", after: mark, timeout: 30) {
                $0.json?["connections"] == .number(3)
            }
            #expect(!received.message.retain)
            let health = try #require(received.json, "\(received.text)")
            func number(_ value: JSONValue?) -> Double? {
                if case .number(let number)? = value { return number }
                return nil
            }
            #expect((number(health["uptime_s"]) ?? -1) >= 1, "\(received.text)")
            #expect((number(health["process"]?["rss_bytes"]) ?? 0) > 1_000_000, "\(received.text)")
            #expect((number(health["process"]?["cpu_seconds"]) ?? 0) > 0, "\(received.text)")
            #expect(health["process"]?["cpu_percent"] != nil, "\(received.text)")
            for counter in ["advertisements", "notifications", "decoded", "published"] {
                #expect((number(health[counter]) ?? 0) > 0, "\(counter) in \(received.text)")
            }
            for reason in [
                "filtered", "repeated_frame", "rate_control", "rate_limited", "registry_full", "retained_command",
                "response_topic",
                "key_missing", "key_wrong", "mqtt_queue_full",
                "mqtt_inbound_full", "parse_error",
                "queue_full", "queue_expired", "queue_unreadable", "offline_qos0", "broker_rejected",
                "notification_cut",
            ] {
                #expect(number(health["dropped"]?[reason]) != nil, "dropped.\(reason) in \(received.text)")
            }
            #expect(number(health["queue"]?["depth"]) == 0, "\(received.text)")
            #expect(number(health["connects"]) == 3 && number(health["reconnects"]) == 0, "\(received.text)")
            // The central pings bluetoothd (here the simulator) once per interval: a round trip in
            // milliseconds, above zero and far below a second on loopback.
            let latency = try #require(number(health["ble_latency_ms"]), "no D-Bus round trip in \(received.text)")
            #expect(latency > 0 && latency < 1000, "\(received.text)")
        }
    }
}
