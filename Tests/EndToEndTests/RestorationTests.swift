import BlueZSimulator
import Foundation
import Glibc
import MQTT
import TestSupport
import Testing

/// State restoration of `gattway run`: the devices a killed gateway was connected to are
/// reconnected by the next one at its start, without waiting for an advertisement
/// (RestorationEndingTests: polled and commanded devices, after a clean stop and a reboot).
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

    /// From the restart of `gattway run` to the first reading of every restored device, at
    /// most. The restored devices connect at the start, before any advertisement, so they must
    /// be no later than the reconnect policy would bring back a link that dropped while the
    /// gateway runs: its first retry comes 1–5 s after the drop (`ReconnectPolicy`'s
    /// `firstDelay`, docs/architecture.md), so 5 s, plus one connect-and-discover attempt
    /// (bounded by the test config's `connect_timeout`, 5 s). The process start, the
    /// subscriptions and the first notification (every 0.2 s in the fast demo world) take well
    /// under a second of that on an idle machine. Without restoration no reading would come at
    /// all: the second gateway's scan filter matches none of the devices' advertisements.
    static let restoredReadingBound = 5.0 + 5.0

    @Test(
        "kill -9 with three connected devices, links dropped meanwhile, advertisements filtered out: the next gateway reconnects all three from central.json and each one's first reading arrives within the reconnect policy's first window plus a connect"
    )
    func killedAndRestored() async throws {
        let directory = try TemporaryDirectory.make(prefix: "gattway-restore")
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
            // One clock for all three devices, from the restart.
            let restart = MessageRecorder.now()
            let deadline = restart + Self.restoredReadingBound
            let second = try e2e.startGateway()
            defer { second.stop(grace: 5) }
            // The lamp only notifies when its state changes: it changes once its subscription is
            // back (the simulator refuses a notification nobody subscribed to).
            let lampNotified = Task {
                while MessageRecorder.now() < deadline {
                    if (try? await e2e.simulator.notify(address: "A4:C1:38:00:00:03", uuid: "ff02", [42])) != nil {
                        return true
                    }
                    try await Task.sleep(for: .milliseconds(20))
                }
                return false
            }
            let readings: [(String, @Sendable (MessageRecorder.Received) -> Bool)] = [
                ("battery_sensor", { $0.number("battery") != nil }),
                ("env_sensor", { $0.number("temperature") != nil }),
                ("lamp", { $0.number("light") == 42 }),
            ]
            for (name, isReading) in readings {
                let reading = try await messages.next(
                    on: "gattway/\(name)", after: mark, timeout: max(0, deadline - MessageRecorder.now()),
                    where: isReading)
                #expect(
                    reading.arrival - restart <= Self.restoredReadingBound,
                    "\(name): first reading \(reading.arrival - restart) s after the restart")
            }
            #expect(try await lampNotified.value)
            let log = second.log()
            for (_, name) in Self.devices {
                #expect(log.contains("\(name): connected in the previous run: reconnecting now"), "\(log)")
            }
        }
    }

    /// central.json's entries as (address, characteristic) pairs of its subscriptions and the
    /// addresses of its devices.
    static func savedState(_ directory: URL) throws -> (devices: [String], subscriptions: [String]) {
        let data = try Data(contentsOf: directory.appendingPathComponent("central.json"))
        let root = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let devices = (root["devices"] as? [[String: Any]] ?? []).compactMap { $0["address"] as? String }
        let subscriptions = (root["subscriptions"] as? [[String: Any]] ?? []).compactMap { entry -> String? in
            guard let address = entry["address"] as? String, let uuid = entry["characteristic"] as? String else {
                return nil
            }
            return "\(address) \(uuid.uppercased())"
        }
        return (devices, subscriptions)
    }

    @Test(
        "central.json naming a device no rule connects, a subscription no rule asks for and a device that cannot be reached: the first two are dropped at the start, SIGTERM keeps only the link it ended (not the device it could not reach), and the next start restores that one alone"
    )
    func cleanStopKeepsItsLinks() async throws {
        let directory = try TemporaryDirectory.make(prefix: "gattway-restore-clean")
        defer { try? FileManager.default.removeItem(at: directory) }
        // What a previous run left after a crash: the env sensor (which no rule connects now),
        // the lamp with a subscription its rule no longer lists (180F/2A19) besides one it does,
        // and a device that is gone (no such device in the simulated world).
        try """
        {"version":1,"devices":[
          {"address":"A4:C1:38:00:00:02","name":"Env Sensor","connect":false},
          {"address":"A4:C1:38:00:00:03","name":"Desk Lamp","connect":false},
          {"address":"A4:C1:38:00:00:99","name":"Gone","connect":false}],
         "subscriptions":[
          {"address":"A4:C1:38:00:00:02","service":"181A","characteristic":"2A6E"},
          {"address":"A4:C1:38:00:00:03","service":"180F","characteristic":"2A19"},
          {"address":"A4:C1:38:00:00:03","service":"FF00","characteristic":"FF02"},
          {"address":"A4:C1:38:00:00:99","service":"180F","characteristic":"2A19"}]}
        """.write(to: directory.appendingPathComponent("central.json"), atomically: true, encoding: .utf8)
        let config = """
            {
              "mqtt": {"server": "$SERVER", "base_topic": "gattway"},
              "state_directory": "\(directory.path)",
              "bluetooth": {"connect_timeout": "5s", "gatt_timeout": "3s"},
              "parsers": {"lamp_state": {"characteristic": "ff02", "fields": [{"name": "light", "offset": 0, "type": "u8"}]}},
              "devices": [
                {"match": {"address": "A4:C1:38:00:00:02"}, "name": "env_sensor"},
                {"match": {"address": "A4:C1:38:00:00:03"}, "name": "lamp", "connect": true,
                 "subscribe": [{"service": "ff00", "characteristic": "ff02", "parser": "lamp_state"}]},
                {"match": {"address": "A4:C1:38:00:00:99"}, "name": "gone", "connect": true,
                 "subscribe": [{"characteristic": "2A19"}]}
              ]
            }
            """
        try await EndToEnd.run(config: config, scenario: try EndToEnd.fastDemo()) { e2e in
            try await e2e.gateway.waitForOutput(containing: "gateway started")
            try await e2e.messages.next(on: "gattway/lamp/availability") { $0.text == #"{"state":"online"}"# }
            let running = try Self.savedState(directory)
            #expect(
                Set(running.subscriptions) == ["A4:C1:38:00:00:03 FF02", "A4:C1:38:00:00:99 2A19"],
                "only what a rule still asks for: \(running)")
            #expect(!running.devices.contains("A4:C1:38:00:00:02"), "\(running)")
            let log = e2e.gateway.log()
            #expect(log.contains("lamp: connected in the previous run: reconnecting now"), "\(log)")
            #expect(log.contains("gone: connected in the previous run: reconnecting now"), "\(log)")
            #expect(!log.contains("env_sensor: connected in the previous run"), "\(log)")

            // A clean stop: the lamp's link is ended and kept for the next start; the unreachable
            // device was never reached, and what was restored without being taken up is left out.
            e2e.gateway.signal(SIGTERM)
            #expect(try await within(30, "gattway run to exit on SIGTERM") { try await e2e.gateway.exited() } == 0)
            let stopped = try Self.savedState(directory)
            #expect(stopped.devices == ["A4:C1:38:00:00:03"], "the link up at the stop: \(stopped)")
            #expect(stopped.subscriptions == ["A4:C1:38:00:00:03 FF02"], "\(stopped)")

            // The next start reconnects the lamp alone from the previous run.
            let next = try e2e.startGateway()
            defer { next.stop(grace: 5) }
            try await next.waitForOutput(containing: "gateway started")
            #expect(next.log().contains("lamp: connected in the previous run: reconnecting now"), "\(next.log())")
            #expect(!next.log().contains("gone: connected in the previous run"), "\(next.log())")
        }
    }
}
