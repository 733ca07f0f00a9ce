import Foundation
import Subprocess

/// A private mosquitto broker for a test: its own config, port and temporary directory.
///
/// The generated mosquitto.conf listens on 127.0.0.1 only (plus an optional TLS listener),
/// allows anonymous clients unless a password file is given, and sets `max_queued_messages 0`
/// (no limit) so a test's offline persistent session never drops messages. With
/// `persistent: true` the broker saves its state (sessions, subscriptions, queued messages) to
/// the temporary directory on a graceful stop and reloads it on ``restart()`` — what a real
/// broker restart looks like. The process is stopped and the directory removed when the value is
/// released.
public final class MosquittoBroker: @unchecked Sendable {
    // Invariant for @unchecked Sendable: `port` and `tlsPort` change only inside init (before the
    // value is shared); `child` is replaced only by start()/restart(), which a test calls from one
    // task at a time; everything else is immutable.
    public private(set) var port: UInt16
    public private(set) var tlsPort: UInt16?
    public let directory: URL
    public private(set) var child: ChildProcess?

    /// TLS listener files (PEM).
    public struct TLS: Sendable {
        public var caFile: String
        public var certificateFile: String
        public var keyFile: String
        /// Ask clients for a certificate signed by `caFile`.
        public var requireClientCertificate: Bool
        public init(caFile: String, certificateFile: String, keyFile: String, requireClientCertificate: Bool = false) {
            self.caFile = caFile
            self.certificateFile = certificateFile
            self.keyFile = keyFile
            self.requireClientCertificate = requireClientCertificate
        }
    }

    /// Writes the config and starts mosquitto; returns once it accepts TCP connections.
    /// - Parameters:
    ///   - passwordFile: a file made by `mosquitto_passwd`; anonymous clients are then refused.
    ///   - tls: adds a TLS listener on ``tlsPort``.
    ///   - persistent: keep state across a graceful ``restart()``.
    public init(passwordFile: String? = nil, tls: TLS? = nil, persistent: Bool = false, extraConfig: [String] = [])
        async throws
    {
        port = try FreePort.tcp()
        tlsPort = tls == nil ? nil : try FreePort.tcp()
        directory = try TemporaryDirectory.make(prefix: "mosquitto")
        // A port that was free a moment ago can be taken (e.g. as the local port of some client's
        // connection) before mosquitto binds it: then pick other ports and try again.
        for attempt in 1...5 {
            if attempt > 1 {
                port = try FreePort.tcp()
                if tls != nil { tlsPort = try FreePort.tcp() }
            }
            try writeConfiguration(
                passwordFile: passwordFile, tls: tls, persistent: persistent, extraConfig: extraConfig)
            do {
                try await start()
                return
            } catch let error as ChildProcessError
                where attempt < 5 && error.description.contains("Address already in use")
            {
                continue
            }
        }
    }

    private func writeConfiguration(passwordFile: String?, tls: TLS?, persistent: Bool, extraConfig: [String]) throws {
        var lines = [
            // Run as ourselves: as root, mosquitto would switch to user "mosquitto", which cannot
            // read the test's private temporary files.
            "user \(String(cString: getpwuid(getuid()).pointee.pw_name))",
            "per_listener_settings false",
            "listener \(port) 127.0.0.1",
            "allow_anonymous \(passwordFile == nil)",
            "max_queued_messages 0",
            "max_inflight_messages 0",
            "log_dest stdout",
            "log_type error",
            "log_type warning",
            "log_type notice",
            "log_type information",
            "connection_messages true",
        ]
        if let passwordFile { lines.append("password_file \(passwordFile)") }
        if persistent {
            lines += ["persistence true", "persistence_location \(directory.path)/", "autosave_interval 3600"]
        } else {
            lines.append("persistence false")
        }
        if let tls, let tlsPort {
            lines += [
                "listener \(tlsPort) 127.0.0.1",
                "cafile \(tls.caFile)",
                "certfile \(tls.certificateFile)",
                "keyfile \(tls.keyFile)",
                "require_certificate \(tls.requireClientCertificate)",
            ]
        }
        lines += extraConfig
        try (lines.joined(separator: "\n") + "\n").write(
            to: directory.appendingPathComponent("mosquitto.conf"), atomically: true, encoding: .utf8)
    }

    deinit {
        child?.stop()
        try? FileManager.default.removeItem(at: directory)
    }

    /// `mqtt://127.0.0.1:PORT`.
    public var url: String { "mqtt://127.0.0.1:\(port)" }
    /// `mqtts://127.0.0.1:TLSPORT`, when there is a TLS listener.
    public var tlsURL: String? { tlsPort.map { "mqtts://127.0.0.1:\($0)" } }

    /// Starts mosquitto (if not running) and waits until it accepts connections.
    public func start() async throws {
        if child?.isRunning == true { return }
        let config = directory.appendingPathComponent("mosquitto.conf").path
        // ChildProcess spawns with an empty signal mask, so a graceful stop (SIGTERM) reaches
        // mosquitto and it saves its state when persistence is on.
        let process = try ChildProcess("mosquitto", ["-c", config])
        child = process
        // Generous: the whole suite starts its brokers and buses at once on two cores.
        let deadline = Date().addingTimeInterval(60)
        while true {
            if !process.isRunning {
                throw ChildProcessError(
                    "mosquitto exited (status \(process.process.terminationStatus)):\n\(process.log())")
            }
            if LoopbackPort.accepts(port) && (tlsPort.map(LoopbackPort.accepts) ?? true) { return }
            if Date() >= deadline { break }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        throw ChildProcessError("mosquitto did not listen on \(port) within 60 s:\n\(process.log())")
    }

    /// Stops the broker gracefully (SIGTERM: clients see the connection close; a persistent
    /// broker saves its state).
    public func stop() { child?.stop() }

    /// Kills the broker with SIGKILL, as a crash would: nothing is saved.
    public func kill() { child?.kill9() }

    /// Stops (gracefully) and starts again on the same port(s) with the same config.
    public func restart() async throws {
        stop()
        try await start()
    }

    /// Everything the broker logged so far (all runs).
    public func log() -> String { child?.log() ?? "" }
}
