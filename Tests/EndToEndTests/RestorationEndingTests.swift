import BlueZSimulator
import Foundation
import Glibc
import TestSupport
import Testing

/// State restoration of devices that are connected without a subscription — one only polled,
/// one only commanded — after each way a run can end: a crash (SIGKILL), a clean stop
/// (SIGTERM) and a reboot (SIGTERM, bluetoothd restarted with its storage kept). The next
/// gateway hears none of their advertisements, so only the saved state can bring them back.
@Suite("End to end: state restoration of polled and commanded devices after a kill, a stop and a reboot")
struct RestorationEndingTests {
    enum Ending: String, CaseIterable, CustomStringConvertible {
        /// `kill -9`; the links drop afterwards (the peers went away for a moment).
        case kill
        /// SIGTERM: the gateway ends its links itself.
        case stop
        /// SIGTERM, then bluetoothd stops (the adapter powers off) and starts again.
        case reboot

        var description: String { rawValue }
    }

    /// The first run: the battery sensor polled, the environmental sensor polled, the lamp
    /// only commanded; all three with `connect: true`.
    static func firstConfig(_ directory: String) -> String {
        """
        {
          "mqtt": {"server": "$SERVER", "base_topic": "gattway"},
          "state_directory": "\(directory)",
          "bluetooth": {"connect_timeout": "5s", "gatt_timeout": "3s"},
          "devices": [
            {"match": {"address": "A4:C1:38:00:00:01"}, "name": "battery_sensor", "connect": true,
             "poll": [{"service": "180F", "characteristic": "2A19", "interval": "1s"}]},
            {"match": {"address": "A4:C1:38:00:00:02"}, "name": "env_sensor", "connect": true,
             "poll": [{"characteristic": "2A6E", "interval": "1s"}]},
            {"match": {"address": "A4:C1:38:00:00:03"}, "name": "lamp", "connect": true,
             "commands": {"light": {"service": "ff00", "characteristic": "ff01", "encoding": "bool"}}}
          ]
        }
        """
    }

    /// The next run: the battery sensor's rule no longer connects; the scan filter matches none
    /// of the devices' advertisements.
    static func nextConfig(_ directory: String) -> String {
        """
        {
          "mqtt": {"server": "$SERVER", "base_topic": "gattway"},
          "state_directory": "\(directory)",
          "bluetooth": {"connect_timeout": "5s", "gatt_timeout": "3s", "scan": {"services": ["FFF0"]}},
          "devices": [
            {"match": {"address": "A4:C1:38:00:00:01"}, "name": "battery_sensor"},
            {"match": {"address": "A4:C1:38:00:00:02"}, "name": "env_sensor", "connect": true,
             "poll": [{"characteristic": "2A6E", "interval": "1s"}]},
            {"match": {"address": "A4:C1:38:00:00:03"}, "name": "lamp", "connect": true,
             "commands": {"light": {"service": "ff00", "characteristic": "ff01", "encoding": "bool"}}}
          ]
        }
        """
    }

    @Test(
        "a polled-only and a command-only connect device are reconnected at the next start without an advertisement, within the reconnect policy's first window plus a connect (10 s), and a device whose rule no longer connects is not",
        arguments: Ending.allCases)
    func restored(after ending: Ending) async throws {
        let directory = try TemporaryDirectory.make(prefix: "gattway-restore-\(ending)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let scenario = try EndToEnd.fastDemo { $0.timing.temporaryTimeout = 120 }
        try await EndToEnd.run(config: Self.firstConfig(directory.path), scenario: scenario) { e2e in
            let messages = e2e.messages
            for name in ["battery_sensor", "env_sensor", "lamp"] {
                try await messages.next(on: "gattway/\(name)/availability") { $0.text == #"{"state":"online"}"# }
            }
            try await messages.next(on: "gattway/env_sensor") { $0.number("temperature") != nil }
            // Saved while running: a crash finds them in the file.
            let running = try RestorationTests.savedState(directory).devices
            #expect(
                Set(running) == ["A4:C1:38:00:00:01", "A4:C1:38:00:00:02", "A4:C1:38:00:00:03"],
                "every connected device is saved, subscribed or not: \(running)")

            switch ending {
            case .kill:
                e2e.gateway.signal(SIGKILL)
                _ = try await within(10, "the killed gateway to exit") { try await e2e.gateway.exited() }
                for address in running { try await e2e.simulator.disconnectPeer(address: address) }
            case .stop, .reboot:
                e2e.gateway.signal(SIGTERM)
                #expect(try await within(30, "gattway run to exit on SIGTERM") { try await e2e.gateway.exited() } == 0)
                let stopped = try RestorationTests.savedState(directory).devices
                #expect(Set(stopped) == Set(running), "a clean stop keeps the links it ended: \(stopped)")
                if ending == .reboot {
                    await e2e.simulator.stop()
                    try await e2e.simulator.restart()
                }
            }
            try Self.nextConfig(directory.path).replacingOccurrences(of: "$SERVER", with: e2e.broker.url)
                .write(toFile: e2e.configPath, atomically: true, encoding: .utf8)
            let mark = messages.count
            let restart = MessageRecorder.now()
            let deadline = restart + RestorationTests.restoredReadingBound
            let next = try e2e.startGateway()
            defer { next.stop(grace: 5) }
            let reading = try await messages.next(
                on: "gattway/env_sensor", after: mark, timeout: max(0, deadline - MessageRecorder.now())
            ) { $0.number("temperature") != nil }
            #expect(reading.arrival - restart <= RestorationTests.restoredReadingBound)
            let online = try await messages.next(
                on: "gattway/lamp/availability", after: mark, timeout: max(0, deadline - MessageRecorder.now())
            ) { $0.text == #"{"state":"online"}"# }
            #expect(online.arrival - restart <= RestorationTests.restoredReadingBound)
            try await next.waitForOutput(containing: "gateway started")
            let log = next.log()
            for name in ["env_sensor", "lamp"] {
                #expect(log.contains("\(name): connected in the previous run: reconnecting now"), "\(log)")
            }
            #expect(!log.contains("battery_sensor: connected in the previous run"), "\(log)")
            #expect(!log.contains("battery_sensor: connected"), "\(log)")
            let kept = try RestorationTests.savedState(directory).devices
            #expect(!kept.contains("A4:C1:38:00:00:01"), "forgotten: its rule no longer connects: \(kept)")
        }
    }
}
