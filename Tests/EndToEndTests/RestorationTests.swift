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

}
