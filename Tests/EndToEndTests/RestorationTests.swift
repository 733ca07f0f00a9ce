import BlueZSimulator
import Foundation
import Glibc
import MQTT
import TestSupport
import Testing

/// State restoration of `gattway run`: the devices a killed gateway was connected to are
/// reconnected by the next one at its start, without waiting for an advertisement.
@Suite("End to end: state restoration after a kill")
struct RestorationTests {
    static let devices = [
        ("A4:C1:38:00:00:01", "battery_sensor"), ("A4:C1:38:00:00:02", "env_sensor"), ("A4:C1:38:00:00:03", "lamp"),
    ]

    static func config(stateDirectory: String, scanServices: String) -> String {
        """
        {
          "mqtt": {"server": "$SERVER", "base_topic": "gattway"},
          "state_directory": "\(stateDirectory)",
          "bluetooth": {"connect_timeout": "5s", "gatt_timeout": "3s", "scan": {"services": [\(scanServices)]}},
          "parsers": {"lamp_state": {"characteristic": "ff02", "fields": [{"name": "light", "offset": 0, "type": "u8"}]}},
          "devices": [
            {"match": {"address": "A4:C1:38:00:00:01"}, "name": "battery_sensor", "connect": true,
             "subscribe": [{"service": "180F", "characteristic": "2A19"}]},
            {"match": {"address": "A4:C1:38:00:00:02"}, "name": "env_sensor", "connect": true,
             "subscribe": [{"characteristic": "2A6E"}]},
            {"match": {"address": "A4:C1:38:00:00:03"}, "name": "lamp", "connect": true,
             "subscribe": [{"service": "ff00", "characteristic": "ff02", "parser": "lamp_state"}]}
          ]
        }
        """
    }

    @Test(
        "kill -9 with three connected devices, links dropped meanwhile, advertisements filtered out: the next gateway reconnects all three from central.json and their readings resume"
    )
    func killedAndRestored() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "gattway-restore-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        // BlueZ keeps a disconnected device's object for two minutes here (its temporary
        // timeout), as it does for a device it saw recently.
        let scenario = try EndToEnd.fastDemo { $0.timing.temporaryTimeout = 120 }
        let first = Self.config(stateDirectory: directory.path, scanServices: "")
        try await EndToEnd.run(config: first, scenario: scenario) { e2e in
            let messages = e2e.messages
            for (_, name) in Self.devices {
                try await messages.next(on: "gattway/\(name)/availability") { $0.text == #"{"state":"online"}"# }
            }
            // The central saved the subscriptions.
            let state = try String(contentsOf: directory.appendingPathComponent("central.json"), encoding: .utf8)
            for (address, _) in Self.devices { #expect(state.contains(address), "\(state)") }

            e2e.gateway.signal(SIGKILL)
            _ = try await within(10, "the killed gateway to exit") { try await e2e.gateway.exited() }
            // The links drop while no gateway runs (the peers went away for a moment).
            for (address, _) in Self.devices { try await e2e.simulator.disconnectPeer(address: address) }
            // The next gateway hears none of their advertisements (its scan filter matches none),
            // so only the saved state can bring the links back.
            try Self.config(stateDirectory: directory.path, scanServices: #""FFF0""#)
                .replacingOccurrences(of: "$SERVER", with: e2e.broker.url)
                .write(toFile: e2e.configPath, atomically: true, encoding: .utf8)
            let mark = messages.count
            let second = try e2e.startGateway()
            defer { second.stop(grace: 5) }
            // Within the reconnect rule's first window (1–5 s) plus connecting and subscribing.
            for (_, name) in Self.devices {
                let online = try await messages.next(on: "gattway/\(name)/availability", after: mark, timeout: 20) {
                    $0.text == #"{"state":"online"}"#
                }
                #expect(online.text.contains("online"))
            }
            try await messages.next(on: "gattway/battery_sensor", after: mark, timeout: 20) {
                $0.number("battery") != nil
            }
            try await messages.next(on: "gattway/env_sensor", after: mark, timeout: 20) {
                $0.number("temperature") != nil
            }
            #expect(
                second.log().contains("battery_sensor: connected in the previous run: reconnecting now"),
                "\(second.log())")
        }
    }
}
