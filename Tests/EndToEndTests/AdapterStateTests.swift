import BlueZSimulator
import DBus
import EventLoop
import Foundation
import JSON
import TestSupport
import Testing

/// `gattway run` under a notify socket (systemd `Type=notify`) while the adapter cannot be used:
/// it is ready at once and says why nothing is read and what to do — in `STATUS=`,
/// `bridge/health`, `bridge/event` and the log (once) — and readings start by themselves when
/// the cause is gone.
@Suite("End to end: the adapter's condition", .serialized)
struct AdapterStateTests {
    /// The demo world's config with a health report every second.
    static let config = DemoWorldConfig.text.replacingOccurrences(
        of: #""commands": {"max_payload_bytes": 256},"#,
        with: #""commands": {"max_payload_bytes": 256}, "health": {"interval": "1s"},"#)

    @Test("powered off: READY at once, powered_off reported with `bluetoothctl power on`; readings once powered on")
    func poweredOff() async throws {
        try await Self.check(
            state: "powered_off", says: "hci0 (00:AA:01:00:00:00) is powered off — bluetoothctl power on",
            scenario: try EndToEnd.fastDemo { $0.adapters[0].powered = false }
        ) { e2e in
            // What `bluetoothctl power on` does.
            try await Self.setPowered(e2e, true)
        }
    }

    @Test(
        "rfkill-blocked: READY at once, rfkill_blocked reported with `rfkill unblock`; power-on refused; readings once unblocked"
    )
    func rfkillBlocked() async throws {
        try await Self.check(
            state: "rfkill_blocked",
            says:
                "hci0 (00:AA:01:00:00:00) is powered off — Bluetooth is blocked by rfkill: sudo rfkill unblock bluetooth",
            // bluetoothd with Experimental = true, which exports PowerState (without it gattway
            // reads /sys/class/rfkill, which this machine does not have).
            scenario: try EndToEnd.fastDemo {
                $0.adapters[0].rfkillBlocked = true
                $0.adapters[0].powerState = true
            }
        ) { e2e in
            // `bluetoothctl power on` cannot help while the radio is blocked.
            await #expect(throws: DBusError.self) { try await Self.setPowered(e2e, true) }
            await e2e.simulator.setBlocked(adapter: "hci0", false)
        }
    }

    @Test("missing: READY at once, missing reported with what to check; readings once the adapter is plugged in")
    func missing() async throws {
        try await Self.check(
            state: "missing", says: "bluetoothd reports no Bluetooth adapter — check the hardware: btmgmt info",
            scenario: try EndToEnd.fastDemo { $0.adapters[0].present = false }
        ) { e2e in
            try await e2e.simulator.setPresent(adapter: "hci0", true)
        }
    }

    @Test(
        "access denied by the D-Bus policy: READY at once, access_denied reported with the policy to install; readings once the policy allows it"
    )
    func accessDenied() async throws {
        let directory = try TemporaryDirectory.make(prefix: "policy")
        defer { try? FileManager.default.removeItem(at: directory) }
        // The system bus's policy refuses everything sent to org.bluez, as for a user that
        // deploy/gattway-dbus.conf does not let in.
        let policy = directory.appendingPathComponent("deny-bluez.conf")
        try """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig><policy context="mandatory"><deny send_destination="org.bluez"/></policy></busconfig>
        """.write(to: policy, atomically: true, encoding: .utf8)
        try await Self.check(
            state: "access_denied",
            says: "AccessDenied talking to org.bluez as \(Self.userName) — run as a user in the bluetooth group",
            busConfig: #"<include ignore_missing="yes">\#(policy.path)</include>"#
        ) { e2e in
            // The policy installed (dbus-daemon reloads it): the gateway tries again by itself.
            try FileManager.default.removeItem(at: policy)
            let connection = try await DBusConnection.connect(to: .address(e2e.daemon.address), on: e2e.loop)
            _ = try await connection.call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                method: "ReloadConfig")
            await connection.close()
        }
    }

    @Test("bluetoothd gone: READY at once, bluetoothd_gone reported with how to start it; readings once it runs")
    func bluetoothdGone() async throws {
        try await Self.check(
            state: "bluetoothd_gone", says: "org.bluez is not on the system bus — is bluetoothd running?",
            simulatorReady: { await $0.crash() }
        ) { e2e in
            try await e2e.simulator.restart()
        }
    }

    // MARK: Helpers

    /// Starts the world with the adapter unusable, checks what a user sees, cures it with
    /// `cure`, and checks that readings start by themselves.
    /// - Parameters:
    ///   - state: the adapter state reported in bridge/health and bridge/event.
    ///   - says: what `STATUS=` and the log line say (what was found — what to do).
    static func check(
        state: String, says: String, scenario: Scenario? = nil, busConfig: String = "",
        simulatorReady: (BlueZSimulator) async throws -> Void = { _ in },
        cure: (EndToEnd) async throws -> Void
    ) async throws {
        let directory = try TemporaryDirectory.make(prefix: "adapter")
        defer { try? FileManager.default.removeItem(at: directory) }
        let socket = try NotifySocketServer(path: directory.appendingPathComponent("notify").path)
        let started = MessageRecorder.now()
        try await EndToEnd.run(
            config: Self.config, scenario: scenario, busConfig: busConfig, simulatorReady: simulatorReady,
            environment: ["NOTIFY_SOCKET": socket.path]
        ) { e2e in
            let messages = e2e.messages
            // Ready at once (the harness saw bridge/state online first), not after ~95 s of
            // waiting for the adapter: STATUS= says why nothing is read and what to do.
            let ready = try await socket.next(containing: "READY=1", within: 10)
            #expect(MessageRecorder.now() - started < 30, "READY=1 after \(MessageRecorder.now() - started) s")
            #expect(ready.contains("STATUS=running, waiting for the adapter: \(says)"), "\(ready)")
            let health = try await messages.next(on: "gattway/bridge/health", timeout: 10) {
                $0.json?["adapter"]?["state"] == .string(state)
            }
            #expect(health.json?["adapter"]?["adapter"] == .string("hci0"), "\(health.text)")
            #expect(health.json?["adapter"]?["fix"] != .null, "\(health.text)")
            let event = try await messages.next(on: "gattway/bridge/event", timeout: 10) {
                $0.string("type") == "adapter_state"
            }
            #expect(event.json?["data"]?["state"] == .string(state), "\(event.text)")
            #expect(event.json?["data"]?["fix"] != .null, "\(event.text)")
            // Said once, not every second: three health reports later, still one line.
            let mark = messages.count
            try await messages.wait(for: "three health reports", count: 3, after: mark, timeout: 10) {
                $0.topic == "gattway/bridge/health"
            }
            #expect(Self.lines(in: e2e, containing: "adapter: \(says)") == 1, "\(e2e.gateway.log())")
            #expect(messages.messages(on: "gattway/bthome_th").isEmpty, "readings without an adapter?")
            #expect(e2e.gateway.isRunning, "gattway run exited")

            // The cause goes away: nothing to restart.
            let cured = messages.count
            try await cure(e2e)
            let running = try await socket.next(containing: "STATUS=running: hci0", within: 30)
            #expect(running.contains("is powered on"), "\(running)")
            let back = try await messages.next(on: "gattway/bridge/event", after: cured, timeout: 30) {
                $0.string("type") == "adapter_state"
            }
            #expect(back.json?["data"]?["state"] == .string("powered_on"), "\(back.text)")
            #expect(back.json?["data"]?["fix"] == .null, "\(back.text)")
            try await messages.next(on: "gattway/bthome_th", after: cured, timeout: 30) {
                $0.number("temperature") != nil
            }
            try await messages.next(on: "gattway/battery_sensor", after: cured, timeout: 30) {
                $0.number("battery") != nil
            }
            try await messages.next(on: "gattway/bridge/health", after: cured, timeout: 10) {
                $0.json?["adapter"]?["state"] == .string("powered_on")
            }
            #expect(
                Self.lines(in: e2e, containing: "adapter: hci0 (00:AA:01:00:00:00) is powered on; scanning") == 1,
                "\(e2e.gateway.log())")
        }
    }

    /// `Powered` set as `bluetoothctl power on`/`off` does.
    static func setPowered(_ e2e: EndToEnd, _ on: Bool) async throws {
        let connection = try await DBusConnection.connect(to: .address(e2e.daemon.address), on: e2e.loop)
        do {
            _ = try await connection.call(
                destination: "org.bluez", path: "/org/bluez/hci0", interface: "org.freedesktop.DBus.Properties",
                method: "Set", arguments: [.string("org.bluez.Adapter1"), .string("Powered"), .variant(.boolean(on))])
        } catch {
            await connection.close()
            throw error
        }
        await connection.close()
    }

    /// How many lines of the gateway's log contain `text`.
    static func lines(in e2e: EndToEnd, containing text: String) -> Int {
        e2e.gateway.log().split(separator: "\n").filter { $0.contains(text) }.count
    }

    /// This process's user name (the gateway runs as it).
    static var userName: String {
        guard let entry = getpwuid(geteuid()) else { return "uid \(geteuid())" }
        return String(cString: entry.pointee.pw_name)
    }
}
