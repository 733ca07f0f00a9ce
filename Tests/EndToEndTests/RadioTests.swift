import BlueZSimulator
import Foundation
import JSON
import TestSupport
import Testing

/// `bluetooth.radio`: `gattway run` reading the simulator's management socket (the kernel's
/// protocol, every report) or bluetoothd's D-Bus view, as a user sees it on MQTT.
@Suite("End to end: the radio")
struct RadioTests {
    /// One BTHome v2 sensor that sends each packet id in four advertising events in a row, as
    /// real sensors repeat a frame, every 40 ms.
    static func repeatingSensor() throws -> Scenario {
        try Scenario.parse(
            Data(
                #"""
                {
                  "timing": {"disconnect_delay": "50ms", "temporary_timeout": "30s", "resolve_delay": "10ms", "gatt_latency": 0},
                  "adapters": [{"name": "hci0", "address": "00:AA:01:00:00:00"}],
                  "devices": [
                    {"address": "A4:C1:38:00:00:04", "address_type": "public", "rssi": -60, "interval": "40ms", "connectable": false,
                     "service_data": {"FCD2": {"template": "bthome_v2", "fields": {
                       "packet_id": {"sequence": [1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6]},
                       "temperature": 21.5}}}}
                  ]
                }
                """#.utf8))
    }

    static func config(radio: String) -> String {
        """
        {
          "mqtt": {"server": "$SERVER", "base_topic": "gattway", "client_id": "gattway-e2e"},
          "bluetooth": {"adapter": "hci0", "radio": "\(radio)"},
          "health": {"interval": "1s"},
          "devices": [{"match": {"address": "A4:C1:38:00:00:04"}, "name": "bthome_th"}]
        }
        """
    }

    @Test(
        "each packet id of a sensor that repeats its frames reaches MQTT once, on both paths; bridge/health names the path",
        arguments: ["mgmt", "dbus"])
    func repeatsPublishedOnce(radio: String) async throws {
        try await EndToEnd.run(
            config: Self.config(radio: radio), scenario: try Self.repeatingSensor(), managementSocket: true
        ) { e2e in
            let messages = e2e.messages
            // Six packet ids, each sent four times: a full turn of the sequence and then some.
            let states = try await messages.wait(for: "states of 8 packet ids", count: 8, timeout: 30) {
                $0.topic == "gattway/bthome_th" && $0.number("packet_id") != nil
            }
            let ids = states.compactMap { $0.number("packet_id") }
            for (earlier, later) in zip(ids, ids.dropFirst()) {
                #expect(later != earlier, "a repeated frame was published again: packet ids \(ids)")
            }
            #expect(Set(ids).count >= 6, "\(ids)")
            // A health message sent after those states counts at least their reports.
            let health = try await messages.next(on: "gattway/bridge/health", after: messages.count, timeout: 30)
            let section = try #require(health.json?["radio"], "\(health.text)")
            #expect(section["path"] == .string(radio), "\(health.text)")
            #expect(section["adapter"] == .string("hci0"), "\(health.text)")
            if radio == "mgmt" {
                // Every report came through, repeats included: four per published packet id.
                guard case .number(let reports)? = section["reports"] else {
                    Issue.record("no report count: \(health.text)")
                    return
                }
                #expect(reports >= Double(ids.count * 3), "\(health.text)")
                guard case .number(let repeats)? = health.json?["dropped"]?["repeated_frame"] else {
                    Issue.record("no repeated_frame count: \(health.text)")
                    return
                }
                #expect(repeats >= Double(ids.count), "\(health.text)")
            }
        }
    }
}
