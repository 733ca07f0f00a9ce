import Foundation
import Subprocess

/// A private `dbus-daemon` for a test: its own generated config, unix socket and temporary
/// directory, stopped (and its directory removed) by ``stop()`` or when the value is released.
///
/// The config is session-style and allows everything (any connection may own any name, send to
/// and receive from anyone), so a BlueZ simulator may own `org.bluez` on it. Point clients at
/// it with ``address`` or, for code that connects to the system bus, with ``environment``
/// (`DBUS_SYSTEM_BUS_ADDRESS` and `DBUS_SESSION_BUS_ADDRESS`) in a child process.
public final class DBusDaemon: @unchecked Sendable {
    // Invariant for @unchecked Sendable: all stored properties are set in init and never change;
    // `child` is a ChildProcess, itself safe to stop from any thread.
    /// The address clients connect to, e.g. `unix:path=/tmp/gattway-dbus-1a2b3c4d/bus`.
    public let address: String
    /// The temporary directory holding the config, socket and log.
    public let directory: URL
    public let child: ChildProcess

    /// Writes the config and starts `dbus-daemon --nofork --print-address`; returns once the daemon
    /// printed its address (it is then accepting connections).
    public init(extraConfig: String = "") async throws {
        directory = try TemporaryDirectory.make(prefix: "dbus")
        let socket = directory.appendingPathComponent("bus").path
        let config = PrivateBusConfiguration.xml(
            socketPath: socket,
            extra: """
                  <limit name="max_incoming_bytes">1000000000</limit>
                  <limit name="max_outgoing_bytes">1000000000</limit>
                  <limit name="max_message_size">1000000000</limit>
                  <limit name="max_replies_per_connection">1000000</limit>
                  <limit name="max_match_rules_per_connection">100000</limit>
                  \(extraConfig)
                """)
        let configURL = directory.appendingPathComponent("bus.conf")
        try config.write(to: configURL, atomically: true, encoding: .utf8)
        child = try ChildProcess(
            "dbus-daemon", ["--config-file=\(configURL.path)", "--nofork", "--print-address", "--nopidfile"])
        do {
            try await child.waitForOutput(containing: "unix:path=", timeout: 60)
        } catch {
            child.stop()
            throw error
        }
        let line = child.log().split(separator: "\n").first { $0.hasPrefix("unix:") }
        address = line.map(String.init) ?? "unix:path=\(socket)"
    }

    deinit { stop() }

    /// Environment for a child process whose system and session buses are this daemon.
    public var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["DBUS_SYSTEM_BUS_ADDRESS"] = address
        environment["DBUS_SESSION_BUS_ADDRESS"] = address
        return environment
    }

    /// Stops the daemon and removes its directory. Safe to call twice.
    ///
    /// Uses SIGKILL: a private bus has nothing to flush.
    public func stop() {
        child.kill9()
        try? FileManager.default.removeItem(at: directory)
    }
}
