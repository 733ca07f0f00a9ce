import Foundation
import TestSupport
import Testing

/// The files in deploy/: the systemd unit passes `systemd-analyze verify`, and install.sh stages
/// the binary, unit, D-Bus policy, configuration and state directory where the docs say.
@Suite("deploy/")
struct DeployTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    @Test("the systemd unit verifies and keeps the promised settings")
    func unitVerifies() async throws {
        let unit = try String(
            contentsOf: Self.repository.appendingPathComponent("deploy/gattway.service"), encoding: .utf8)
        for setting in [
            "Type=notify", "WatchdogSec=", "Restart=on-failure", "RestartPreventExitStatus=64 78",
            "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_BLUETOOTH", "ProtectSystem=strict",
            "NoNewPrivileges=yes",
            // The management socket's reports need CAP_NET_ADMIN, and the unit grants nothing else.
            "CapabilityBoundingSet=CAP_NET_ADMIN\n", "AmbientCapabilities=CAP_NET_ADMIN\n",
            // gattway run stops within 5 s (docs/operations.md, "Stopping"): SIGKILL only well after.
            "TimeoutStopSec=10s",
        ] {
            #expect(unit.contains(setting), "gattway.service lacks \(setting)")
        }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze") else { return }
        // Verify a copy whose ExecStart names the binary just built (the installed path does not exist here).
        let directory = try TemporaryDirectory.make(prefix: "unit")
        let gattway = try BuiltProduct.path("gattway")
        let copy = unit.replacingOccurrences(of: "/usr/local/bin/gattway", with: gattway)
            .replacingOccurrences(of: "User=gattway\n", with: "").replacingOccurrences(of: "Group=gattway\n", with: "")
        let path = directory.appendingPathComponent("gattway.service")
        try copy.write(to: path, atomically: true, encoding: .utf8)
        let result = try await ChildProcess.run("/usr/bin/systemd-analyze", ["verify", "--man=no", path.path])
        #expect(result.status == 0, "systemd-analyze verify: \(result.output)")
        #expect(!result.output.contains("gattway.service:"), "warnings about the unit: \(result.output)")
    }

    @Test("install.sh stages every file with the documented modes and keeps an existing config")
    func installStages() async throws {
        let root = try TemporaryDirectory.make(prefix: "stage")
        let gattway = try BuiltProduct.path("gattway")
        let script = Self.repository.appendingPathComponent("deploy/install.sh").path
        var environment = ProcessInfo.processInfo.environment
        environment["DESTDIR"] = root.path
        environment["GATTWAY_BINARY"] = gattway
        let first = try await ChildProcess.run("/bin/bash", [script], environment: environment)
        #expect(first.status == 0, "install.sh: \(first.output)")
        let files = FileManager.default
        for (path, mode) in [
            ("usr/local/bin/gattway", 0o755), ("etc/systemd/system/gattway.service", 0o644),
            ("etc/dbus-1/system.d/gattway.conf", 0o644), ("etc/gattway/config.json", 0o640),
            ("var/lib/gattway", 0o750),
        ] {
            let attributes = try files.attributesOfItem(atPath: root.appendingPathComponent(path).path)
            #expect(
                (attributes[.posixPermissions] as? Int) == mode,
                "\(path) has mode \(String(describing: attributes[.posixPermissions]))")
        }
        let check = try await ChildProcess.run(
            gattway, ["config", "check", root.appendingPathComponent("etc/gattway/config.json").path])
        #expect(check.status == 0, "the installed default configuration is valid: \(check.output)")
        let config = root.appendingPathComponent("etc/gattway/config.json")
        try Data("{\"mqtt\": {}}".utf8).write(to: config)
        let second = try await ChildProcess.run("/bin/bash", [script], environment: environment)
        #expect(second.status == 0)
        #expect(second.output.contains("kept the existing"))
        #expect(
            try String(contentsOf: config, encoding: .utf8) == "{\"mqtt\": {}}",
            "a second install keeps the user's config")
    }
}
