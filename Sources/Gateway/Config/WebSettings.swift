import JSON
import LocalSystem

/// `web` in config.json: the web server of `gattway run` (docs/web.md): `/metrics`, the JSON API
/// and its event stream. The core does not run it; `gattway run` starts it beside the core.
public struct WebSettings: Sendable, Equatable {
    /// `enabled`: serve at all.
    public var enabled = true
    /// `listen`: IPv4 address and TCP port, "127.0.0.1:8080" by default (this host only).
    public var host = "127.0.0.1"
    public var port: UInt16 = 8080
    /// `auth.token` (or read from `auth.token_file`): `Authorization: Bearer <token>`, or a login.
    public var token: String?
    /// `auth.token_file`: where ``token`` was read from.
    public var tokenFile: String?
    /// `auth.users_file`: lines `user:password` a browser logs in with.
    public var usersFile: String?
    /// The users of ``usersFile``.
    public var users: [User] = []
    /// `tls.cert_file` and `tls.key_file`: HTTPS with this certificate chain and key (PEM).
    public var tls: TLS?
    /// `max_connections`: connections at once.
    public var maxConnections = 32
    /// `max_body`: the largest request body, in bytes.
    public var maxBodyBytes = 16 * 1024
    /// `event_buffer`: bytes an event-stream client may fall behind before it is dropped.
    public var eventBufferBytes = 64 * 1024
    /// `idle_timeout`: seconds a connection may stay silent (no request, nothing to send) before it
    /// is closed. An event stream is never silent: it gets a keep-alive comment every 15 s.
    public var idleTimeoutSeconds = 30

    public struct User: Sendable, Equatable {
        public var name: String
        public var password: String
    }

    public struct TLS: Sendable, Equatable {
        public var certFile: String
        public var keyFile: String
    }

    /// Whether `listen` is a loopback address (127.0.0.0/8): reachable from this host only.
    public var isLoopback: Bool { host.hasPrefix("127.") }

    /// Whether a token or a user is configured.
    public var hasAuth: Bool { token != nil || !users.isEmpty }

    public init() {}

    init(_ object: inout ConfigObject) {
        enabled = object.read("enabled", default: enabled) { try $0.bool() }
        if let (host, port) = object.optional("listen", { try $0.listenAddress() }) {
            self.host = host
            self.port = port
        }
        if let value = object.value("auth"), var auth = ConfigObject(value, object.problems) {
            readAuth(&auth)
            auth.finish()
        }
        if let value = object.value("tls"), var tls = ConfigObject(value, object.problems) {
            let cert = tls.required("cert_file", expected: "the certificate chain, PEM") { try $0.nonEmptyString() }
            let key = tls.required("key_file", expected: "the private key, PEM") { try $0.nonEmptyString() }
            for (key, file) in [("cert_file", cert), ("key_file", key)] {
                if let file, LocalFile.read(file) == nil {
                    tls.problems.add(tls.childPath(key), "cannot read \"\(file)\"")
                }
            }
            if let cert, let key { self.tls = TLS(certFile: cert, keyFile: key) }
            tls.finish()
        }
        maxConnections = object.read("max_connections", default: maxConnections) { try $0.integer(in: 1...1024) }
        maxBodyBytes = object.read("max_body", default: maxBodyBytes) { try $0.integer(in: 256...(1 << 20)) }
        eventBufferBytes = object.read("event_buffer", default: eventBufferBytes) {
            try $0.integer(in: 1024...(1 << 22))
        }
        idleTimeoutSeconds = object.read("idle_timeout", default: idleTimeoutSeconds) { reader in
            let seconds = try reader.duration()
            guard seconds >= 5, seconds <= 3600, seconds == seconds.rounded() else {
                throw reader.fail("expected whole seconds from \"5s\" to \"1h\"")
            }
            return Int(seconds)
        }
        if enabled, !isLoopback, !hasAuth {
            object.problems.add(
                object.childPath("auth"),
                "is required when listen (\(host):\(port)) is not a loopback address: anyone on the network could "
                    + "use the web server (set auth.token or auth.users_file, or listen on 127.0.0.1)")
        }
        object.finish()
    }

    private mutating func readAuth(_ auth: inout ConfigObject) {
        token = auth.optional("token") { reader in
            let text = try reader.nonEmptyString()
            guard text.utf8.count >= 16 else {
                throw reader.fail("expected at least 16 characters (e.g. from: openssl rand -hex 16)")
            }
            return text
        }
        tokenFile = auth.optional("token_file") { try $0.nonEmptyString() }
        if let tokenFile {
            if token != nil {
                auth.problems.add(auth.childPath("token_file"), "give either token or token_file, not both")
            } else if let data = LocalFile.read(tokenFile) {
                let line = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline).first ?? ""
                if line.utf8.count >= 16 {
                    token = String(line)
                } else {
                    auth.problems.add(
                        auth.childPath("token_file"),
                        "\"\(tokenFile)\": expected a first line of at least 16 characters")
                }
            } else {
                auth.problems.add(
                    auth.childPath("token_file"), "cannot read \"\(tokenFile)\" (expected a file holding the token)")
            }
        }
        usersFile = auth.optional("users_file") { try $0.nonEmptyString() }
        if let usersFile {
            if let data = LocalFile.read(usersFile) {
                for (number, line) in String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline)
                    .enumerated()
                {
                    guard !line.hasPrefix("#"), !line.allSatisfy({ $0 == " " }) else { continue }
                    guard let colon = line.firstIndex(of: ":"), colon != line.startIndex,
                        line[line.index(after: colon)...].count >= 8
                    else {
                        auth.problems.add(
                            auth.childPath("users_file"),
                            "\"\(usersFile)\" line \(number + 1): expected user:password with a password of at least 8 characters"
                        )
                        continue
                    }
                    users.append(
                        User(name: String(line[..<colon]), password: String(line[line.index(after: colon)...])))
                }
                if users.isEmpty { auth.problems.add(auth.childPath("users_file"), "\"\(usersFile)\" names no user") }
            } else {
                auth.problems.add(auth.childPath("users_file"), "cannot read \"\(usersFile)\"")
            }
        }
    }
}
