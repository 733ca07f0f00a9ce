import Retry

/// Everything needed to connect an ``MQTTClient``: broker address, identity, session, TLS,
/// credentials, last will, flow control and reconnect policy.
///
/// Build it from a URL and adjust fields; ``MQTTClient/init(configuration:loop:)`` validates the
/// combination (e.g. MQTT 5 properties with protocol 3.1.1) and throws ``MQTTError`` when it
/// cannot work.
public struct MQTTConfiguration: Sendable {
    /// Host name or IP address of the broker.
    public var host: String
    /// TCP port; from the URL or 1883 (`mqtt://`) / 8883 (`mqtts://`).
    public var port: Int
    /// Client identifier sent in CONNECT. Empty lets the broker assign one (only with a clean
    /// session).
    public var clientID: String
    /// Seconds between keepalive pings; 0 disables them, otherwise 5…65535 (a libmosquitto limit).
    public var keepAlive: Int = 60
    /// MQTT protocol version.
    public var protocolVersion: MQTTProtocolVersion = .v5
    /// 3.1.1 "clean session" / 5 "clean start": when false the broker keeps subscriptions and
    /// queued QoS 1/2 messages while the client is away (with MQTT 5 for ``sessionExpiryInterval``).
    public var cleanSession: Bool = true
    /// MQTT 5 session expiry interval in seconds (nil: 0, the session ends with the connection;
    /// `UInt32.max`: never expires). Ignored by 3.1.1, where a non-clean session never expires.
    public var sessionExpiryInterval: UInt32?
    /// MQTT 5 Maximum Packet Size (bytes) the client accepts: the broker does not send it a
    /// larger packet (it drops the message for this client), so a publisher cannot make the
    /// client hold a message of hundreds of megabytes. nil: the protocol's limit (256 MiB).
    /// Ignored by 3.1.1, which has no such property.
    public var maximumPacketSize: UInt32?
    /// User name and password for the broker's authentication.
    public var credentials: MQTTCredentials?
    /// TLS settings; set by `mqtts://` URLs (with the system's CA certificates) and required for them.
    public var tls: MQTTTLSConfiguration?
    /// Message the broker publishes on our behalf when the connection ends without DISCONNECT.
    public var will: MQTTMessage?
    /// At most this many QoS 1/2 publishes are unacknowledged at once (`MOSQ_OPT_SEND_MAXIMUM`);
    /// further ones wait in the client, in order. An MQTT 5 broker's Receive Maximum lowers it.
    public var maxInflight: Int = 1000
    /// At most this many QoS 1/2 publishes wait in the client beyond the in-flight window (while
    /// connected) or for a connection; a publish beyond it completes at once with
    /// ``MQTTError/Kind/queueFull`` and is counted in ``MQTTClient/queueFullCount``. It bounds
    /// memory when publishes outrun the broker's acknowledgements (each waiting message costs its
    /// topic, payload and completion: about 320 B for a 90-byte state message).
    public var maxQueued: Int = 10_000
    /// Delays between connection attempts after the connection is lost.
    public var reconnect: MQTTReconnectPolicy = MQTTReconnectPolicy()
    /// Local address to bind the socket to, if any.
    public var bindAddress: String?
    /// More brokers to try, in order, when the one in use cannot be reached or its connection is
    /// lost (the nodes of a cluster): the same scheme, TLS settings and credentials.
    public var alternates: [MQTTEndpoint] = []

    /// The broker of the URL and the ``alternates``, in the order they are tried.
    public var endpoints: [MQTTEndpoint] { [MQTTEndpoint(host: host, port: port)] + alternates }

    /// Adds a broker to try when the others fail: a URL with the primary's scheme and without
    /// credentials of its own.
    public mutating func addAlternate(url: String) throws(MQTTError) {
        let other = try MQTTConfiguration(url: url, clientID: clientID)
        guard (other.tls != nil) == (tls != nil) else {
            throw MQTTError(
                .invalidConfiguration,
                "broker URL \"\(url)\" does not use the first one's scheme (all mqtt:// or all mqtts://)")
        }
        guard other.credentials == nil else {
            throw MQTTError(
                .invalidConfiguration,
                "broker URL \"\(url)\": credentials go in the first URL (or mqtt.username/password)")
        }
        alternates.append(MQTTEndpoint(host: other.host, port: other.port))
    }

    /// Parses `mqtt://host[:port]` or `mqtts://host[:port]` (IPv6 in brackets, `[::1]:1883`);
    /// an optional `user:password@` sets ``credentials``.
    public init(url: String, clientID: String) throws(MQTTError) {
        func invalid(_ why: String) -> MQTTError {
            MQTTError(
                .invalidConfiguration,
                "broker URL \"\(url)\" is invalid: \(why) (expected mqtt://host:port or mqtts://host:port)")
        }
        let secure: Bool
        var rest: Substring
        if url.hasPrefix("mqtt://") {
            secure = false
            rest = url.dropFirst("mqtt://".count)
        } else if url.hasPrefix("mqtts://") {
            secure = true
            rest = url.dropFirst("mqtts://".count)
        } else {
            throw invalid("the scheme must be mqtt:// or mqtts://")
        }
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.contains("/") && !rest.contains("?") else { throw invalid("a path or query is not allowed") }
        if let at = rest.lastIndex(of: "@") {
            let userInfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            let parts = userInfo.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            credentials = MQTTCredentials(
                username: String(parts[0]), password: parts.count > 1 ? String(parts[1]) : nil)
        }
        var hostPart: Substring
        var portPart: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw invalid("an IPv6 address lacks its ']'") }
            hostPart = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw invalid("expected ':' after ']'") }
                portPart = after.dropFirst()
            }
        } else if let colon = rest.lastIndex(of: ":") {
            hostPart = rest[..<colon]
            portPart = rest[rest.index(after: colon)...]
        } else {
            hostPart = rest
        }
        guard !hostPart.isEmpty else { throw invalid("the host is missing") }
        if let portPart {
            guard let port = Int(portPart), (1...65535).contains(port) else {
                throw invalid("the port \"\(portPart)\" is not a number from 1 to 65535")
            }
            self.port = port
        } else {
            port = secure ? 8883 : 1883
        }
        host = String(hostPart)
        self.clientID = clientID
        if secure { tls = MQTTTLSConfiguration() }
    }

    /// Checks combinations libmosquitto would reject late or silently.
    func validate() throws(MQTTError) {
        func invalid(_ why: String) -> MQTTError { MQTTError(.invalidConfiguration, "MQTT configuration: \(why)") }
        guard keepAlive == 0 || (5...65535).contains(keepAlive) else {
            throw invalid("keepAlive \(keepAlive) must be 0 or 5…65535 seconds")
        }
        guard (1...65535).contains(maxInflight) else { throw invalid("maxInflight \(maxInflight) must be 1…65535") }
        guard maxQueued >= 0 else { throw invalid("maxQueued \(maxQueued) must be 0 or more") }
        if clientID.isEmpty && !cleanSession {
            throw invalid("a persistent session (cleanSession false) needs a client id")
        }
        if protocolVersion == .v311 {
            if sessionExpiryInterval != nil { throw invalid("sessionExpiryInterval needs protocol version 5") }
            if let will, !will.properties.isEmpty { throw invalid("last will properties need protocol version 5") }
        }
        if let will {
            guard !will.topic.isEmpty, !will.topic.contains("+"), !will.topic.contains("#") else {
                throw invalid("last will topic \"\(will.topic)\" must be a topic name without wildcards")
            }
        }
        try reconnect.validate()
    }
}

/// The MQTT protocol version spoken (`MOSQ_OPT_PROTOCOL_VERSION`).
public enum MQTTProtocolVersion: Sendable, Hashable {
    /// MQTT 3.1.1 (`MQTT_PROTOCOL_V311`).
    case v311
    /// MQTT 5.0 (`MQTT_PROTOCOL_V5`): properties, reason codes, session expiry.
    case v5
}

/// User name and optional password (`mosquitto_username_pw_set`).
public struct MQTTCredentials: Sendable, Hashable {
    public var username: String
    public var password: String?
    public init(username: String, password: String?) {
        self.username = username
        self.password = password
    }
}

/// TLS settings (`mosquitto_tls_set`, `mosquitto_tls_opts_set`, `mosquitto_tls_insecure_set`).
public struct MQTTTLSConfiguration: Sendable, Hashable {
    /// PEM file of CA certificates that may sign the broker's certificate.
    public var caFile: String?
    /// Directory of CA certificates (hashed names, as made by `openssl rehash`).
    public var caDirectory: String?
    /// PEM client certificate, for brokers that require one (`require_certificate true`).
    public var certificateFile: String?
    /// PEM private key of the client certificate (unencrypted).
    public var keyFile: String?
    /// Skips verification of the broker's certificate chain and host name. Only for tests and
    /// broken deployments: anyone on the path can then read and alter the traffic.
    public var insecureSkipVerification: Bool = false
    /// Lowest TLS version to offer; nil lets OpenSSL choose (TLS 1.2 or 1.3).
    public var version: Version?

    /// A TLS protocol version as libmosquitto names it.
    public enum Version: String, Sendable, Hashable {
        case tls1_2 = "tlsv1.2"
        case tls1_3 = "tlsv1.3"
    }

    /// TLS trusting the system's CA certificates (`MOSQ_OPT_TLS_USE_OS_CERTS`) unless
    /// ``caFile`` or ``caDirectory`` is set.
    public init(
        caFile: String? = nil, caDirectory: String? = nil, certificateFile: String? = nil,
        keyFile: String? = nil, insecureSkipVerification: Bool = false, version: Version? = nil
    ) {
        self.caFile = caFile
        self.caDirectory = caDirectory
        self.certificateFile = certificateFile
        self.keyFile = keyFile
        self.insecureSkipVerification = insecureSkipVerification
        self.version = version
    }
}

/// How long to wait between connection attempts: exponential backoff with jitter.
///
/// The n-th consecutive failed attempt waits `min(maximum, minimum · multiplier^(n-1))`, then
/// that delay is spread by ±`jitter` (a fraction) so many gateways do not reconnect in step
/// after a broker restart. A successful connection resets the sequence.
public struct MQTTReconnectPolicy: Sendable, Hashable {
    /// Delay after the first failure, in seconds.
    public var minimumDelay: Double
    /// Largest delay, in seconds.
    public var maximumDelay: Double
    /// Growth factor per consecutive failure (≥ 1).
    public var multiplier: Double
    /// Fraction of the delay added or removed at random, 0…1.
    public var jitter: Double

    public init(minimumDelay: Double = 0.5, maximumDelay: Double = 30, multiplier: Double = 2, jitter: Double = 0.2) {
        self.minimumDelay = minimumDelay
        self.maximumDelay = maximumDelay
        self.multiplier = multiplier
        self.jitter = jitter
    }

    /// The delays as the shared backoff rule: the first failure waits `minimumDelay` (± jitter),
    /// each further one `multiplier` times the previous base, up to `maximumDelay`.
    public var backoff: ExponentialBackoff.Configuration {
        ExponentialBackoff.Configuration(
            first: minimumDelay...minimumDelay, multiplier: multiplier, maximum: maximumDelay, jitter: jitter)
    }

    func validate() throws(MQTTError) {
        guard backoff.isValid else {
            throw MQTTError(
                .invalidConfiguration,
                "MQTT reconnect policy: need 0 < minimumDelay ≤ maximumDelay, multiplier ≥ 1 and jitter in 0…1 (got \(minimumDelay), \(maximumDelay), \(multiplier), \(jitter))"
            )
        }
    }
}

/// One broker address.
public struct MQTTEndpoint: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}
