import BlueZSimulator
import Foundation
import Glibc
import TestSupport
import Testing

/// `bridge/request/device/bindkey` through `gattway run`: a simulated encrypted BTHome v2 sensor
/// is reported once as `key_missing`, decodes once its key is set over MQTT, and still decodes
/// after a restart (the key is in the state directory).
@Suite("End to end: bind keys at run time")
struct BindKeyTests {
    /// One device advertising a real encrypted BTHome v2 frame (25.06 °C) every 100 ms.
    static let scenario = """
        {
          "seed": 1,
          "adapters": [{ "name": "hci0", "address": "00:AA:01:00:00:00", "alias": "gattway-keys" }],
          "devices": [
            { "address": "54:48:E6:8F:80:A5", "name": "BTHome encrypted", "rssi": -60, "interval": "100ms",
              "connectable": false,
              "service_data": { "FCD2": { "hex": "41a47266c95f730011223378237214" } } }
          ]
        }
        """
    static let key = "231d39c1d7cc1ab1aee224cd096db932"

    static func config(stateDirectory: String) -> String {
        """
        {"mqtt": {"server": "$SERVER", "base_topic": "gattway"}, "state_directory": "\(stateDirectory)",
         "homeassistant": {"enabled": false}, "devices": [{"match": {"services": ["FCD2"]}}]}
        """
    }

    @Test(
        "key_missing once, the key set over MQTT decodes the sensor, bindkeys.json is 0600 and the next gateway decodes at once"
    )
    func setOverMQTT() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "gattway-keys-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let scenario = try Scenario.parse(Data(Self.scenario.utf8))
        try await EndToEnd.run(config: Self.config(stateDirectory: directory.path), scenario: scenario) { e2e in
            let messages = e2e.messages
            let missing = try await messages.next(on: "gattway/bridge/event") { $0.string("type") == "key_missing" }
            #expect(missing.text.contains("54:48:E6:8F:80:A5"), "\(missing.text)")
            // Many more advertisements, still one event.
            try await Task.sleep(for: .seconds(1))

            let mark = messages.count
            try await e2e.send(
                "gattway/bridge/request/device/bindkey",
                #"{"device": "5448E68F80A5", "key": "\#(Self.key)", "transaction": "k"}"#)
            let reply = try await messages.next(on: "gattway/bridge/response/device/bindkey", after: mark) {
                $0.string("transaction") == "k"
            }
            #expect(reply.string("status") == "ok", "\(reply.text)")
            #expect(reply.json?["data"]?["persisted"] == .bool(true), "\(reply.text)")
            let state = try await messages.next(on: "gattway/5448E68F80A5", after: mark, timeout: 20) {
                $0.number("temperature") != nil
            }
            #expect(state.number("temperature") == 25.06, "\(state.text)")
            #expect(messages.all.filter { $0.topic == "gattway/bridge/event" && $0.text.contains("key_") }.count == 1)

            let file = directory.appendingPathComponent("bindkeys.json").path
            let attributes = try FileManager.default.attributesOfItem(atPath: file)
            #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
            let log = e2e.gateway.log()
            #expect(log.split(separator: "\n").filter { $0.contains("key_missing") }.count == 1, "\(log)")
            #expect(!log.lowercased().contains(Self.key))
            // (The observer subscribes to "#": it also recorded the request.)
            #expect(
                !messages.all.contains {
                    !$0.topic.hasPrefix("gattway/bridge/request/") && $0.text.lowercased().contains(Self.key)
                })

            // A restart: the key comes from the state directory.
            e2e.gateway.stop(grace: 5)
            _ = try await within(10, "the gateway to exit") { try await e2e.gateway.exited() }
            let restart = messages.count
            let second = try e2e.startGateway()
            defer { second.stop(grace: 5) }
            let again = try await messages.next(on: "gattway/5448E68F80A5", after: restart, timeout: 30) {
                $0.number("temperature") != nil
            }
            #expect(again.number("temperature") == 25.06)
            #expect(!messages.all.dropFirst(restart).contains { $0.text.contains("key_missing") })
        }
    }
}
