import Foundation
import TestSupport
import Testing

/// `gattway scan|inspect|read|write|notify` against `gattway simulate` on a private bus.
@Suite("gattway BLE commands")
struct CentralCommandTests {
    static let scenario = """
        {
          "timing": {"disconnect_delay": "50ms", "temporary_timeout": "5s", "resolve_delay": "10ms", "gatt_latency": 0},
          "devices": [
            {"address": "A4:C1:38:00:00:01", "name": "Battery Sensor", "interval": "20ms", "service_uuids": ["180F"],
             "gatt": [{"uuid": "180F", "characteristics": [
                {"uuid": "2A19", "flags": ["read", "notify"], "value": {"number": 94, "format": "u8"},
                 "notify": {"every": "20ms", "value": {"number": {"counter": {"start": 93, "step": -1, "min": 0, "max": 100}}, "format": "u8"}},
                 "descriptors": [{"uuid": "2901", "value": {"utf8": "Level"}}]}]},
               {"uuid": "ff00", "characteristics": [
                {"uuid": "ff01", "flags": ["write", "write-without-response"], "reflect_writes_to": "ff02"},
                {"uuid": "ff02", "flags": ["read"], "value": {"hex": "00"}}]}]},
            {"address": "A4:C1:38:00:00:06", "name": "HR Strap", "interval": "20ms", "service_uuids": ["180D"]},
            {"address": "A4:C1:38:00:00:07", "interval": "20ms", "connectable": false,
             "service_data": {"FCD2": {"template": "bthome_v2"}}}
          ]
        }
        """

    /// Runs `body` with a private bus, a simulator process on it, and a function running gattway there.
    static func withSimulator(
        _ body: (_ run: ([String]) async throws -> (status: Int32, output: String)) async throws -> Void
    ) async throws {
        let gattway = try BuiltProduct.path("gattway")
        let daemon = try await DBusDaemon()
        defer { daemon.stop() }
        let file = daemon.directory.appendingPathComponent("scenario.json")
        try scenario.write(to: file, atomically: true, encoding: .utf8)
        let simulator = try ChildProcess(
            gattway, ["simulate", "--scenario", file.path, "--quiet"], environment: daemon.environment)
        defer { simulator.stop() }
        try await simulator.waitForOutput(containing: "org.bluez is")
        try await body { arguments in try await ChildProcess.run(gattway, arguments, environment: daemon.environment) }
    }

    @Test("scan prints JSON lines when not on a terminal, with --services and --duration, decoding known adverts")
    func scan() async throws {
        try await Self.withSimulator { run in
            let result = try await run(["scan", "--duration", "5s"])
            #expect(result.status == 0)
            let lines = result.output.split(separator: "\n").compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
            #expect(
                Set(lines.compactMap { $0["address"] as? String }).isSuperset(of: [
                    "A4:C1:38:00:00:01", "A4:C1:38:00:00:06", "A4:C1:38:00:00:07",
                ]))
            let bthome = lines.first { $0["address"] as? String == "A4:C1:38:00:00:07" }
            #expect((bthome?["decoded"] as? [String: Any])?["format"] as? String == "bthome_v2")
            let filtered = try await run(["scan", "--services", "180F", "--duration", "5s", "--json"])
            #expect(filtered.status == 0)
            #expect(filtered.output.contains("Battery Sensor"))
            #expect(!filtered.output.contains("HR Strap"))
        }
    }

    @Test("inspect prints the GATT tree with flags, values and descriptors")
    func inspect() async throws {
        try await Self.withSimulator { run in
            let result = try await run(["inspect", "A4:C1:38:00:00:01", "--timeout", "10s"])
            #expect(result.status == 0, "\(result.output)")
            #expect(result.output.contains("service 180F (Battery Service)"))
            #expect(result.output.contains("characteristic 2A19 (Battery Level) [read,notify] = 5e (battery=94%)"))
            #expect(result.output.contains("descriptor 2901"))
            #expect(result.output.contains("\"Level\""))
        }
    }

    @Test("write, read back, and notify")
    func readWriteNotify() async throws {
        try await Self.withSimulator { run in
            let write = try await run(["write", "A4:C1:38:00:00:01", "ff01", "0a0b"])
            #expect(write.status == 0, "\(write.output)")
            let read = try await run(["read", "A4:C1:38:00:00:01", "FF00/ff02", "--json"])
            #expect(read.status == 0, "\(read.output)")
            #expect(read.output.contains(#""hex":"0a0b""#))
            let notify = try await run(["notify", "A4:C1:38:00:00:01", "2A19", "--count", "3"])
            #expect(notify.status == 0, "\(notify.output)")
            #expect(notify.output.split(separator: "\n").filter { $0.contains("battery=") }.count == 3)
            // The two print a value alike: read's JSON object leads with the address, notify's does not.
            let battery = try await run(["read", "A4:C1:38:00:00:01", "2A19", "--json"])
            #expect(
                battery.output.contains(
                    #"{"address":"A4:C1:38:00:00:01","characteristic":"2A19","hex":"5e","readings":{"battery":94}}"#),
                "\(battery.output)")
            let notified = try await run(["notify", "A4:C1:38:00:00:01", "2A19", "--count", "1", "--json"])
            let line = notified.output.split(separator: "\n").first ?? ""
            #expect(
                line.hasPrefix(#"{"characteristic":"2A19","hex":""#) && line.contains(#","readings":{"battery":"#),
                "\(notified.output)")
        }
    }

    @Test(
        "usage and runtime errors have the documented exit codes",
        arguments: [
            (["read", "nope", "2A19"], Int32(64), "is not a Bluetooth address"),
            (["read", "A4:C1:38:00:00:01", "ZZZ"], 64, "is not a characteristic UUID"),
            (["write", "A4:C1:38:00:00:01", "ff01", "xyz"], 64, "is not hex bytes"),
            (["read", "A4:C1:38:00:00:01", "2A00"], 1, "has no characteristic 2A00"),
        ])
    func errors(arguments: [String], status: Int32, message: String) async throws {
        try await Self.withSimulator { run in
            let result = try await run(arguments + ["--timeout", "5s"])
            #expect(result.status == status)
            #expect(result.output.contains(message), "\(result.output)")
        }
    }
}
