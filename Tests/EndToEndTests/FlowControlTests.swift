import BlueZSimulator
import Foundation
import Testing

/// The promise that no reading is lost when notifications outrun the broker: a QoS 1 burst many
/// times larger than the MQTT client's own queue (`mqtt.max_queued`) arrives complete and in
/// order, because the gateway reads the characteristic no faster than it can hand readings on
/// and queues them in the store-and-forward stage while the broker is behind (BENCHMARKS.md,
/// docs/operations.md). Nothing here depends on how fast the machine is.
@Suite("End to end: flow control")
struct FlowControlTests {
    static let devices = ["A4:C1:38:00:02:01", "A4:C1:38:00:02:02"]
    static let perDevice = 3_000

    /// Connectable sensors with 181A / 2A6E (read, notify), as the bench uses.
    static var scenario: String {
        let devices = Self.devices.map {
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

    /// QoS 1 with a client queue of 50 messages; the burst's u32 sequence number is decoded as
    /// `counter`. Replayed messages carry `captured_at` only with MQTT 5.
    static func config(protocol version: String) -> String {
        """
        {"mqtt": {"server": "$SERVER", "qos": 1, "max_queued": 50, "protocol": "\(version)"},
         "bluetooth": {"scan": {"services": ["181A"]}, "connect_timeout": "10s"},
         "homeassistant": {"enabled": false},
         "parsers": {"sequence": {"fields": [{"name": "counter", "offset": 0, "type": "u32le"}]}},
         "devices": [{"match": {"address_prefix": "A4:C1:38:00:02"}, "connect": true, "advertisements": false,
                      "subscribe": [{"service": "181A", "characteristic": "2A6E", "parser": "sequence"}]}]}
        """
    }

    @Test(
        "a QoS 1 burst of 6,000 notifications, 120 times max_queued, arrives complete and in order on each device's topic",
        arguments: ["5", "3.1.1"])
    func burstLargerThanTheClientQueue(protocol version: String) async throws {
        let scenario = try Scenario.parse(Data(Self.scenario.utf8))
        try await EndToEnd.run(config: Self.config(protocol: version), scenario: scenario) { e2e in
            // Subscribed everywhere once a notification no longer fails (NotConnected/NotSubscribed).
            let deadline = Date().addingTimeInterval(60)
            var ready = Set<String>()
            while ready.count < Self.devices.count {
                for address in Self.devices where !ready.contains(address) {
                    if (try? await e2e.simulator.notify(address: address, uuid: "2A6E", [0xFF, 0xFF, 0xFF, 0x7F]))
                        != nil
                    {
                        ready.insert(address)
                    }
                }
                #expect(
                    Date() < deadline,
                    "gattway subscribed on \(ready.count) of \(Self.devices.count) devices within 60 s")
                if Date() > deadline { return }
                try await Task.sleep(for: .milliseconds(50))
            }
            let probes = try await e2e.messages.wait(
                for: "the probe reading of every device", count: Self.devices.count
            ) {
                $0.number("counter") == Double(0x7FFF_FFFF)
            }
            let topics = Set(probes.map(\.topic))
            #expect(topics.count == Self.devices.count, "\(topics)")
            let start = e2e.messages.count

            for address in Self.devices {
                try await e2e.simulator.burst(address: address, uuid: "2A6E", count: Self.perDevice, rate: 0)
            }
            let total = Self.devices.count * Self.perDevice
            try await e2e.messages.wait(for: "\(total) burst readings", count: total, after: start, timeout: 120) {
                topics.contains($0.topic) && $0.number("counter") != nil
            }
            let received = e2e.messages.all.dropFirst(start)
            for topic in topics.sorted() {
                let counters = received.filter { $0.topic == topic }.compactMap { $0.number("counter") }.map { Int($0) }
                #expect(
                    counters == Array(0..<Self.perDevice),
                    "\(topic): \(counters.count) readings; first differences at \(Self.firstMismatch(counters))")
            }
        }
    }

    static func firstMismatch(_ counters: [Int]) -> String {
        guard let index = counters.indices.first(where: { counters[$0] != $0 }) else { return "none (count only)" }
        return "#\(index): \(counters[max(0, index - 2)..<min(counters.count, index + 3)])"
    }
}
