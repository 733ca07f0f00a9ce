import Foundation
import Gateway
import Testing

@Suite("config.json web")
struct WebConfigTests {
    static func parse(_ json: String) throws -> GatewayConfig { try GatewayConfig.parse(Array(json.utf8)) }

    static func problems(_ json: String) -> [String] {
        do {
            _ = try parse(json)
            return []
        } catch let error as GatewayConfigError {
            return error.lines
        } catch {
            return ["\(error)"]
        }
    }

    @Test("on by default, on 127.0.0.1:8080, open (this host only), 32 connections, 16 KiB bodies, 30 s idle")
    func defaults() throws {
        let web = try Self.parse("{}").web
        #expect(web.enabled && web.host == "127.0.0.1" && web.port == 8080 && web.isLoopback && !web.hasAuth)
        #expect(
            web.maxConnections == 32 && web.maxBodyBytes == 16384 && web.eventBufferBytes == 65536 && web.tls == nil)
        #expect(web.idleTimeoutSeconds == 30)
    }

    @Test("idle_timeout: a duration of whole seconds from 5 s to 1 h")
    func idleTimeout() throws {
        #expect(try Self.parse(#"{"web": {"idle_timeout": "2m"}}"#).web.idleTimeoutSeconds == 120)
        #expect(try Self.parse(#"{"web": {"idle_timeout": 5}}"#).web.idleTimeoutSeconds == 5)
        for bad in [#""4s""#, #""2h""#, #""5500ms""#, #""soon""#] {
            #expect(
                Self.problems(#"{"web": {"idle_timeout": \#(bad)}}"#).first?.hasPrefix("web.idle_timeout: expected")
                    == true,
                "\(bad)")
        }
    }

    @Test("listening beyond loopback without auth is a config error that says what to do")
    func authRequired() throws {
        let lines = Self.problems(#"{"web": {"listen": "0.0.0.0:8080"}}"#)
        #expect(
            lines == [
                "web.auth: is required when listen (0.0.0.0:8080) is not a loopback address: anyone on the network could use the web server (set auth.token or auth.users_file, or listen on 127.0.0.1)"
            ])
        // Disabled, it does not matter; with a token it is fine.
        #expect(Self.problems(#"{"web": {"enabled": false, "listen": "0.0.0.0:8080"}}"#) == [])
        let web = try Self.parse(#"{"web": {"listen": "192.168.1.2:80", "auth": {"token": "0123456789abcdef"}}}"#).web
        #expect(web.token == "0123456789abcdef" && web.host == "192.168.1.2" && web.port == 80)
    }

    @Test("the token: at least 16 characters, from the config or a file (first line); the token is a secret")
    func token() throws {
        #expect(Self.problems(#"{"web": {"auth": {"token": "short"}}}"#).first?.hasPrefix("web.auth.token:") == true)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "gattway-webconfig-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let tokenFile = directory.appendingPathComponent("token").path
        try "fedcba9876543210fedc\nignored\n".write(toFile: tokenFile, atomically: true, encoding: .utf8)
        let config = try Self.parse(#"{"web": {"auth": {"token_file": "\#(tokenFile)"}}}"#)
        #expect(config.web.token == "fedcba9876543210fedc")
        #expect(config.secrets.contains("fedcba9876543210fedc"))
        #expect(config.secretFiles.map(\.path).contains(tokenFile))
        #expect(!config.holdsSecrets)
        #expect(try Self.parse(#"{"web": {"auth": {"token": "0123456789abcdef"}}}"#).holdsSecrets)
        #expect(
            Self.problems(#"{"web": {"auth": {"token": "0123456789abcdef", "token_file": "\#(tokenFile)"}}}"#)
                == ["web.auth.token_file: give either token or token_file, not both"])
        #expect(Self.problems(#"{"web": {"auth": {"token_file": "/nonexistent/token"}}}"#).count == 1)
        // The users file: user:password lines, comments and blank lines skipped; bad lines named.
        let users = directory.appendingPathComponent("users").path
        try "# web users\nann:password1\n\nbob:secret-two\n".write(toFile: users, atomically: true, encoding: .utf8)
        let withUsers = try Self.parse(#"{"web": {"auth": {"users_file": "\#(users)"}}}"#)
        #expect(withUsers.web.users.map(\.name) == ["ann", "bob"])
        #expect(withUsers.secrets.contains("secret-two"))
        try "ann:short\n".write(toFile: users, atomically: true, encoding: .utf8)
        #expect(Self.problems(#"{"web": {"auth": {"users_file": "\#(users)"}}}"#).first?.contains("line 1") == true)
    }

    @Test("tls needs both files, readable; limits are checked; unknown keys named")
    func tlsAndLimits() {
        #expect(
            Self.problems(#"{"web": {"tls": {"cert_file": "/nonexistent/cert.pem"}}}"#) == [
                "web.tls.key_file: is required (the private key, PEM)",
                "web.tls.cert_file: cannot read \"/nonexistent/cert.pem\"",
            ])
        #expect(Self.problems(#"{"web": {"max_connections": 0}}"#).count == 1)
        #expect(Self.problems(#"{"web": {"max_body": 10}}"#).count == 1)
        #expect(Self.problems(#"{"web": {"listen": "localhost:80"}}"#).count == 1)
        #expect(Self.problems(#"{"web": {"port": 80}}"#).first?.hasPrefix("web.port: is not a known key") == true)
    }
}
