import Foundation
import TestSupport
import Testing

/// `gattway run` warns at start about every world-readable file holding one of its secrets
/// (the same check as `gattway doctor`), before it touches the bus or the broker.
@Suite("gattway run: world-readable secrets")
struct RunSecretsTests {
    /// Runs `gattway run` with `config` (mode `mode`) against a bus that does not exist, so it
    /// stops right after its start-up checks; returns what it printed.
    static func run(_ config: String, mode: Int, in directory: URL) async throws -> String {
        let file = directory.appendingPathComponent("config-\(UUID().uuidString).json")
        try config.write(to: file, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: file.path)
        let environment = ["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=\(directory.path)/no-bus", "PATH": "/usr/bin:/bin"]
        let result = try await ChildProcess.run(
            try BuiltProduct.path("gattway"), ["run", "--config", file.path], environment: environment)
        #expect(result.status != 0, "no bus, no gateway:\n\(result.output)")
        return result.output.replacingOccurrences(of: file.path, with: "CONFIG")
    }

    @Test(
        "a world-readable config with a password, password_file or TLS client key is warned about, without the secret; 0600 files are not"
    )
    func warnings() async throws {
        let directory = try TemporaryDirectory.make(prefix: "run-secrets")
        defer { try? FileManager.default.removeItem(at: directory) }
        let mqtt = #""server": "mqtt://127.0.0.1:9", "username": "gateway""#
        let inline = try await Self.run(
            #"{"mqtt": {\#(mqtt), "password": "s3cret"}, "devices": []}"#, mode: 0o644, in: directory)
        #expect(
            inline.contains("<4>CONFIG is world-readable and holds a password or key; run: chmod o-r CONFIG"),
            "\(inline)")
        #expect(!inline.contains("s3cret"), "\(inline)")
        let closed = try await Self.run(
            #"{"mqtt": {\#(mqtt), "password": "s3cret"}, "devices": []}"#, mode: 0o600, in: directory)
        #expect(!closed.contains("world-readable"), "\(closed)")

        let passwordFile = directory.appendingPathComponent("password").path
        let key = directory.appendingPathComponent("client.key").path
        let certificate = directory.appendingPathComponent("client.crt").path
        for path in [passwordFile, key, certificate] {
            try "s3cret\n".write(toFile: path, atomically: true, encoding: .utf8)
        }
        for path in [passwordFile, key] {
            try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: path)
        }
        let files =
            #"{"mqtt": {\#(mqtt), "password_file": "\#(passwordFile)", "tls": {"cert_file": "\#(certificate)", "key_file": "\#(key)"}}, "devices": []}"#
        let output = try await Self.run(files, mode: 0o644, in: directory)
        #expect(
            output.contains("\(passwordFile) is world-readable and holds the MQTT password (mqtt.password_file)"),
            "\(output)")
        #expect(
            output.contains("\(key) is world-readable and holds the TLS client key (mqtt.tls.key_file)"), "\(output)")
        #expect(
            !output.contains("CONFIG is world-readable"), "the config names the files but holds no secret:\n\(output)")
    }

    @Test("a world-readable config holding a presence IRK is warned about, without the IRK")
    func presenceIRK() async throws {
        let directory = try TemporaryDirectory.make(prefix: "run-secrets-irk")
        defer { try? FileManager.default.removeItem(at: directory) }
        let irk = "ec0234a357c8ad05341010a60a397d9b"
        let output = try await Self.run(
            #"{"mqtt": {"server": "mqtt://127.0.0.1:9"}, "presence": {"identities": [{"name": "phone", "irk": "\#(irk)"}]}}"#,
            mode: 0o644, in: directory)
        #expect(
            output.contains("<4>CONFIG is world-readable and holds a password or key; run: chmod o-r CONFIG"),
            "\(output)")
        #expect(!output.lowercased().contains(irk), "\(output)")
    }
}
