import BlueZSimulator
import Foundation
import JSON
import TestSupport
import Testing

/// Notifications longer than the link's MTU allows: the simulator's peer cuts them to MTU − 3
/// bytes as a peripheral's stack does, and `gattway run` warns once per device and
/// characteristic and counts them in `bridge/health`.
@Suite("End to end: notifications cut at the link's MTU − 3")
struct NotificationCutTests {
    @Test(
        "on a link of MTU 23 a 30-byte lamp state arrives cut to 20 bytes: its parser needs 25, one warning with the MTU and the length for three cut notifications, dropped.notification_cut counts 3, nothing published from them"
    )
    func cutNotifications() async throws {
        let config = """
            {
              "mqtt": {"server": "$SERVER", "base_topic": "gattway"},
              "bluetooth": {"connect_timeout": "5s", "gatt_timeout": "3s"},
              "health": {"interval": "1s"},
              "parsers": {"lamp_state": {"characteristic": "ff02", "fields": [
                {"name": "light", "offset": 0, "type": "u8"}, {"name": "tail", "offset": 24, "type": "u8"}]}},
              "devices": [
                {"match": {"address": "A4:C1:38:00:00:03"}, "name": "lamp", "connect": true,
                 "subscribe": [{"service": "ff00", "characteristic": "ff02", "parser": "lamp_state"}]}
              ]
            }
            """
        let scenario = try EndToEnd.fastDemo { $0.timing.mtu = 23 }
        try await EndToEnd.run(config: config, scenario: scenario) { e2e in
            try await e2e.messages.next(on: "gattway/lamp/availability") { $0.text == #"{"state":"online"}"# }
            // The parser needs 25 bytes; one notification carries at most MTU − 3 = 20. Three
            // 30-byte values (the first once the lamp's subscription is up):
            let long = [UInt8](1...30)
            var sent = 0
            let deadline = MessageRecorder.now() + 10
            while sent < 3, MessageRecorder.now() < deadline {
                if (try? await e2e.simulator.notify(address: "A4:C1:38:00:00:03", uuid: "ff02", long)) != nil {
                    sent += 1
                } else {
                    try await Task.sleep(for: .milliseconds(20))
                }
            }
            #expect(sent == 3)
            let received = try await e2e.messages.next(on: "gattway/bridge/health", timeout: 30) {
                $0.json?["dropped"]?["notification_cut"] == .number(3)
            }
            #expect(received.json?["parse_errors"] == .number(0), "not parse errors: \(received.text)")
            let log = e2e.gateway.log()
            let warning =
                "lamp: notification of FF02 cut to 20 bytes by the link's ATT MTU of 23 (a notification carries at most MTU − 3 = 20 bytes of a value"
            #expect(log.components(separatedBy: warning).count - 1 == 1, "warned once: \(log)")
            #expect(!e2e.messages.all.contains { $0.topic == "gattway/lamp" && $0.number("light") == 1 })
        }
    }
}
