import BlueZSimulator
import Foundation
import JSON
import TestSupport
import Testing

/// `mqtt.raw_advertisements`: `gattway run` on the simulator publishes what the radio hears on
/// `gattway/bridge/radio/<address>`, with what became of each address — as a Node-RED flow or a
/// script subscribed to the broker sees it — on both report paths.
@Suite("End to end: the raw radio on MQTT")
struct RawRadioTests {
    static let sensor = "A4:C1:38:00:00:04"
    static let encrypted = "54:48:E6:8F:80:A5"
    static let unsupported = "C0:FF:EE:00:00:01"
    static let weak = "A4:C1:38:00:00:09"
    static let battery = "A4:C1:38:00:00:0B"

    /// A BTHome sensor, an encrypted BTHome sensor without its key, a device advertising FCD2
    /// with manufacturer data no parser knows, a BTHome sensor far away (-95 dBm), and a device
    /// that advertises only the battery service (outside `scan.services`).
    static func world() throws -> Scenario {
        try RadioTests.world(
            #"""
                    {"address": "\#(sensor)", "address_type": "public", "rssi": -60, "interval": "100ms", "connectable": false,
                     "service_data": {"FCD2": {"template": "bthome_v2", "fields": {"packet_id": {"counter": {"start": 1}}, "temperature": 21.5}}}},
                    {"address": "\#(encrypted)", "rssi": -60, "interval": "100ms", "connectable": false,
                     "service_data": {"FCD2": {"hex": "41a47266c95f730011223378237214"}}},
                    {"address": "\#(unsupported)", "address_type": "random", "name": "Mystery \"box\"", "rssi": -55, "interval": "100ms",
                     "connectable": false, "service_uuids": ["FCD2"], "manufacturer_data": {"0xFFFE": {"hex": "010203"}}},
                    {"address": "\#(weak)", "rssi": -95, "interval": "100ms", "connectable": false,
                     "service_data": {"FCD2": {"template": "bthome_v2", "fields": {"temperature": 19.0}}}},
                    {"address": "\#(battery)", "rssi": -50, "interval": "100ms", "connectable": false, "service_uuids": ["180F"]}
            """#)
    }

    static func config(radio: String) -> String {
        """
        {
          "mqtt": {"server": "$SERVER", "base_topic": "gattway", "client_id": "gattway-e2e",
                   "raw_advertisements": {"mode": "changed", "interval": "1s"}},
          "bluetooth": {"adapter": "hci0", "radio": "\(radio)", "scan": {"services": ["FCD2"], "rssi_threshold": -80}},
          "health": {"interval": "1s"},
          "homeassistant": {"enabled": false},
          "devices": [{"match": {"address": "\(sensor)"}, "name": "bthome_th"}, {"match": {"services": ["FCD2"]}}]
        }
        """
    }

    @Test(
        "every address heard is on bridge/radio with its bytes, RSSI, adapter and what became of it, QoS 0, not retained; health counts it",
        arguments: ["mgmt", "dbus"])
    func whatTheRadioHears(radio: String) async throws {
        try await EndToEnd.run(
            config: Self.config(radio: radio), scenario: try Self.world(), managementSocket: true
        ) { e2e in
            let messages = e2e.messages
            func outcome(_ address: String, _ expected: String) async throws -> MessageRecorder.Received {
                try await messages.next(on: "gattway/bridge/radio/\(address)", timeout: 30) {
                    $0.string("outcome") == expected
                }
            }
            let decoded = try await outcome(Self.sensor, "decoded")
            #expect(decoded.string("parser") == "bthome_v2")
            #expect(decoded.string("device") == "bthome_th")
            #expect(decoded.string("adapter") == "hci0")
            #expect(decoded.number("rssi").map { $0 < -50 && $0 > -70 } == true, "\(decoded.text)")
            #expect(decoded.string("source") == radio, "mgmt: the controller's bytes; dbus: rebuilt")
            #expect(decoded.message.qos == .atMostOnce)
            #expect(!decoded.message.retain)
            let data = try #require(decoded.string("data"))
            // The BTHome service data (length, 0x16, D2 FC, device info 0x40) is in the bytes either way.
            #expect(data.contains("16d2fc40"), "\(data)")
            if radio == "mgmt" {
                #expect(decoded.string("address_type") == "public")
                #expect(data.hasPrefix("020106"), "the flags, which only the controller's bytes have: \(data)")
            }
            let missing = try await outcome(Self.encrypted, "key_missing")
            #expect(missing.string("decode") == "key_missing")
            let unknown = try await outcome(Self.unsupported, "unknown_format")
            #expect(unknown.json?["name"] == .string("Mystery \"box\""), "\(unknown.text)")
            #expect(unknown.string("data")?.contains("fffeff010203") == true, "\(unknown.text)")
            let below = try await outcome(Self.weak, "below_rssi_threshold")
            #expect(below.string("decode") == "decoded")
            #expect(below.string("parser") == "bthome_v2")
            #expect(below.number("rssi").map { $0 < -80 } == true, "\(below.text)")
            let filtered = try await outcome(Self.battery, "filtered_by_scan_services")
            #expect(filtered.string("decode") == "no_payload")
            // The filtered devices never reached a device topic; the sensor's readings did.
            try await messages.wait(for: "a bthome_th state", count: 1, timeout: 30) {
                $0.topic == "gattway/bthome_th" && $0.number("temperature") == 21.5
            }
            #expect(!messages.all.contains { $0.topic == "gattway/A4C13800000B" || $0.topic == "gattway/A4C138000009" })
            // The sensor's packet id changes with every advertisement: changed mode publishes it,
            // at most once a second; the rest is counted.
            let health = try await messages.next(on: "gattway/bridge/health", after: messages.count, timeout: 30) {
                ($0.json?["dropped"]?["radio_rate_limited"]).map { $0 != .number(0) } ?? false
            }
            #expect((health.json?["raw_radio"]?["addresses"]).map { $0 == .number(5) } ?? false, "\(health.text)")
            let sensorMessages = messages.messages(on: "gattway/bridge/radio/\(Self.sensor)")
            let span = (sensorMessages.last?.arrival ?? 0) - (sensorMessages.first?.arrival ?? 0)
            #expect(
                Double(sensorMessages.count) <= span + 2, "about one a second: \(sensorMessages.count) in \(span) s")
        }
    }

    @Test(
        "with two adapters a message names the adapter of its report and carries each adapter's RSSI, on both paths",
        arguments: ["mgmt", "dbus"])
    func twoAdapters(radio: String) async throws {
        let config = AdaptersTests.config(
            radio: radio, devices: #"{"match": {"address": "A4:C1:38:00:00:04"}, "name": "bthome_th"}"#
        ).replacingOccurrences(
            of: #""client_id": "gattway-e2e"}"#,
            with: #""client_id": "gattway-e2e", "raw_advertisements": {"mode": "all", "interval": "0s"}}"#)
        try await EndToEnd.run(
            config: config, scenario: try AdaptersTests.sensorHeardTwice(), managementSocket: true
        ) { e2e in
            let topic = "gattway/bridge/radio/\(Self.sensor)"
            // Both adapters heard it, and the message of a report names its adapter.
            let both = try await e2e.messages.next(on: topic, timeout: 30) {
                $0.json?["rssi_by_adapter"]?["hci0"] != nil && $0.json?["rssi_by_adapter"]?["hci1"] != nil
            }
            #expect(both.json?["rssi_by_adapter"]?["hci0"] == .number(-60), "\(both.text)")
            #expect(both.json?["rssi_by_adapter"]?["hci1"] == .number(-70), "\(both.text)")
            for adapter in ["hci0", "hci1"] {
                let one = try await e2e.messages.next(on: topic, timeout: 30) { $0.string("adapter") == adapter }
                #expect(one.number("rssi") == (adapter == "hci0" ? -60 : -70), "\(one.text)")
            }
            // A frame taken from one adapter is a repeat from the other: both outcomes are seen.
            try await e2e.messages.next(on: topic, timeout: 30) { $0.string("outcome") == "repeated_frame" }
            try await e2e.messages.next(on: topic, timeout: 30) { $0.string("outcome") == "decoded" }
        }
    }
}
