import EventLoop
import Foundation
import MQTT
import TestSupport
import Testing

/// Certificates made with openssl for one test: a CA, a server certificate for 127.0.0.1,
/// a client certificate, and an unrelated CA.
struct TestCertificates {
    let directory: URL
    func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    init() async throws {
        directory = try TemporaryDirectory.make(prefix: "certs")
        let dir = directory.path
        func openssl(_ arguments: [String]) async throws {
            let (status, output) = try await ChildProcess.run("openssl", arguments)
            guard status == 0 else {
                throw ChildProcessError("openssl \(arguments.joined(separator: " ")) failed:\n\(output)")
            }
        }
        let key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        for ca in ["ca", "other-ca"] {
            try await openssl(
                ["req", "-x509"] + key + [
                    "-keyout", "\(dir)/\(ca).key", "-out", "\(dir)/\(ca).crt", "-days", "2", "-subj",
                    "/CN=gattway test \(ca)",
                ])
        }
        try "subjectAltName=IP:127.0.0.1,DNS:localhost\n".write(
            toFile: "\(dir)/san.ext", atomically: true, encoding: .utf8)
        for (name, subject) in [("server", "/CN=127.0.0.1"), ("client", "/CN=gattway-client")] {
            try await openssl(
                ["req"] + key + ["-keyout", "\(dir)/\(name).key", "-out", "\(dir)/\(name).csr", "-subj", subject])
            try await openssl([
                "x509", "-req", "-in", "\(dir)/\(name).csr", "-CA", "\(dir)/ca.crt", "-CAkey", "\(dir)/ca.key",
                "-CAcreateserial", "-out", "\(dir)/\(name).crt", "-days", "2", "-extfile", "\(dir)/san.ext",
            ])
        }
    }
}

@Suite("MQTT authentication and TLS")
struct SecurityTests {
    static func passwordFile(user: String, password: String) async throws -> String {
        let file = try TemporaryDirectory.make(prefix: "passwd").appendingPathComponent("passwd").path
        let (status, output) = try await ChildProcess.run("mosquitto_passwd", ["-c", "-b", file, user, password])
        guard status == 0 else { throw ChildProcessError("mosquitto_passwd failed: \(output)") }
        return file
    }

    @Test(
        "the right username and password connect; a wrong password is refused as not authorized",
        arguments: [MQTTProtocolVersion.v311, .v5])
    func usernamePassword(version: MQTTProtocolVersion) async throws {
        let broker = try await MosquittoBroker(
            passwordFile: await Self.passwordFile(user: "gateway", password: "s3cret"))
        let loop = EventLoop()
        defer { loop.shutdown() }
        try await withTimeout(120) {
            var good = try MQTTConfiguration.test(broker.url, "auth", version: version)
            good.credentials = MQTTCredentials(username: "gateway", password: "s3cret")
            let client = try MQTTClient(configuration: good, loop: loop)
            try await client.connect()
            try await client.publish(MQTTMessage(topic: "auth/ok", string: "in"))
            await client.disconnect()

            var bad = good
            bad.credentials = MQTTCredentials(username: "gateway", password: "wrong")
            let refused = try MQTTClient(configuration: bad, loop: loop)
            let error = await #expect(throws: MQTTError.self) { try await refused.connect() }
            #expect(error?.kind == .refused(.notAuthorized), "\(String(describing: error))")
            #expect(error?.description.lowercased().contains("not authorized") == true, "\(String(describing: error))")
            #expect(await refused.state == .disconnected(error: error, reconnectIn: nil))
            await refused.disconnect()
        }
    }

    @Test("an anonymous client is refused by a broker that requires a password, with a typed error")
    func anonymousRefused() async throws {
        let broker = try await MosquittoBroker(passwordFile: await Self.passwordFile(user: "u", password: "p"))
        let loop = EventLoop()
        defer { loop.shutdown() }
        try await withTimeout(120) {
            let client = try MQTTClient(configuration: .test(broker.url, "anon"), loop: loop)
            let error = await #expect(throws: MQTTError.self) { try await client.connect() }
            #expect(error?.reasonCode?.isSuccess == false, "\(String(describing: error))")
            await client.disconnect()
        }
    }

    @Test("TLS with a CA, server and client certificate connects and carries messages")
    func tlsConnects() async throws {
        let certs = try await TestCertificates()
        let broker = try await MosquittoBroker(
            tls: .init(
                caFile: certs.path("ca.crt"), certificateFile: certs.path("server.crt"),
                keyFile: certs.path("server.key"),
                requireClientCertificate: true))
        let loop = EventLoop()
        defer { loop.shutdown() }
        try await withTimeout(120) {
            var configuration = try MQTTConfiguration.test(try #require(broker.tlsURL), "tls")
            configuration.tls = MQTTTLSConfiguration(
                caFile: certs.path("ca.crt"), certificateFile: certs.path("client.crt"),
                keyFile: certs.path("client.key"),
                version: .tls1_2)
            let client = try MQTTClient(configuration: configuration, loop: loop)
            try await client.connect()
            let (received, _) = collect(try await client.subscribe(to: "tls/echo"))
            try await client.publish(MQTTMessage(topic: "tls/echo", string: "secret"))
            try await eventually("the echo") { received.count == 1 }
            #expect(received.all.first?.payloadString == "secret")
            await client.disconnect()
        }
    }

    @Test("a broker certificate from an unknown CA is refused with a TLS error; insecure mode skips the check")
    func tlsWrongCA() async throws {
        let certs = try await TestCertificates()
        let broker = try await MosquittoBroker(
            tls: .init(
                caFile: certs.path("ca.crt"), certificateFile: certs.path("server.crt"),
                keyFile: certs.path("server.key")))
        let loop = EventLoop()
        defer { loop.shutdown() }
        try await withTimeout(120) {
            var configuration = try MQTTConfiguration.test(try #require(broker.tlsURL), "tls-bad")
            configuration.tls = MQTTTLSConfiguration(caFile: certs.path("other-ca.crt"))
            let client = try MQTTClient(configuration: configuration, loop: loop)
            let error = await #expect(throws: MQTTError.self) { try await client.connect() }
            #expect(error?.kind == .tls, "\(String(describing: error))")
            await client.disconnect()

            configuration.tls?.insecureSkipVerification = true
            let insecure = try MQTTClient(configuration: configuration, loop: loop)
            try await insecure.connect()
            await insecure.disconnect()
        }
    }
}
