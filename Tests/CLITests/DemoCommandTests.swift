import Foundation
import TestSupport
import Testing

/// `gattway demo`: private bus + simulator + mosquitto + gateway, readings and a command round trip.
@Suite("gattway demo")
struct DemoCommandTests {
    @Test(
        "demo --duration 45s prints decoded readings with units and a successful command round trip, ends by itself and leaves no process behind"
    )
    func demo() async throws {
        // Long enough that the children are still there when the round trip is done on a loaded
        // machine (the duration counts from the demo's start: with 8 s, and later with 20 s on a
        // machine at a load of 10, the demo had ended them by then).
        let demo = try ChildProcess(try BuiltProduct.path("gattway"), ["demo", "--duration", "45s"])
        defer { demo.stop() }
        try await demo.waitForOutput(containing: "command round trip OK", timeout: 40)
        // What it started (dbus-daemon, mosquitto, gattway run), seen while they run.
        let children = Self.children(of: demo.pid)
        #expect(children.count == 3, "\(children)")
        let deadline = Date().addingTimeInterval(60)
        while demo.isRunning && Date() < deadline { try await Task.sleep(nanoseconds: 50_000_000) }
        #expect(!demo.isRunning, "demo did not end after --duration")
        #expect(demo.terminationStatus == 0, "\(demo.log())")
        let output = demo.log()
        for expected in [
            "battery_sensor  battery ", " %", "env_sensor ", "temperature ", " °C", "bthome_th ", "pressure 1008.5 hPa",
            #"response: {"transaction":"demo-1","status":"ok","error":null"#,
            "simulator: the lamp received a write of 01 to ff01",
            "desk_lamp       light 1",
            "demo stopped",
        ] {
            #expect(output.contains(expected), "missing \"\(expected)\" in:\n\(output)")
        }
        #expect(!output.contains("A4:C1:38:00:00:06") && !output.contains("A4C138000006"))
        for pid in children {
            #expect(kill(pid, 0) == -1 && errno == ESRCH, "process \(pid) survived the demo")
        }
    }

    @Test(
        "demo --print-config prints the demo's gateway configuration for the given broker, which config check accepts")
    func printConfig() async throws {
        let gattway = try BuiltProduct.path("gattway")
        let printed = try await ChildProcess.run(gattway, ["demo", "--print-config", "mqtt://127.0.0.1:18999"])
        #expect(printed.status == 0)
        #expect(printed.output.contains(#""server": "mqtt://127.0.0.1:18999""#))
        #expect(printed.output.contains("desk_lamp"))
        let path = NSTemporaryDirectory() + "demo-config-\(getpid()).json"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try printed.output.write(toFile: path, atomically: true, encoding: .utf8)
        let check = try await ChildProcess.run(gattway, ["config", "check", path])
        #expect(check.status == 0, "\(check.output)")
    }

    /// The direct children of `pid`, from /proc/*/stat.
    static func children(of pid: Int32) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { entry -> Int32? in
            guard let child = Int32(entry),
                let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { return nil }
            // After "pid (comm)": state, ppid, …
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 1, Int32(fields[1]) == pid else { return nil }
            return child
        }
    }
}
