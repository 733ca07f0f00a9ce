import JSON
import LocalSystem

/// `mqtt` in config.json: the broker, the base topic and the publishing defaults.
public struct MQTTSettings: Sendable, Equatable {
    /// `mqtt://host[:port]` or `mqtts://host[:port]`.
    public var server = "mqtt://127.0.0.1:1883"
    /// `alternate_servers`: more brokers to try, in order, when the one in use cannot be reached
    /// or its connection is lost — the other nodes of a cluster (docs/fleet.md).
    public var alternateServers: [String] = []
    /// The first topic level of everything the gateway publishes and subscribes.
    public var baseTopic = "gattway"
    public var clientID = "gattway"
    public var username: String?
    /// The broker password, written in the config or read from ``passwordFile``.
    public var password: String?
    /// `password_file`: where ``password`` was read from (nil: written in the config, or none).
    public var passwordFile: String?
    /// 5 or 3 (3.1.1).
    public var protocolVersion = 5
    /// Keepalive in seconds.
    public var keepalive: Double = 60
    public var tls: TLS?
    /// QoS of everything the gateway publishes unless a device overrides it.
    public var qos = 1
    /// `subscription_qos`: the QoS of the gateway's subscriptions (commands, fleet messages,
    /// `from_topic`s). 0 on a RabbitMQ cluster, whose QoS 1 subscriptions live on one node and are
    /// refused elsewhere while that node is down (docs/fleet.md).
    public var subscriptionQoS = 1
    /// Retain flag of device state messages unless a device overrides it.
    public var retain = false
    /// Also publish each attribute as a plain value on `<base>/<device>/<attribute>`.
    public var attributeTopics = false
    /// At most this many QoS 1/2 messages wait in the MQTT client for the broker's
    /// acknowledgements or for a connection; beyond it a message is dropped
    /// (`dropped.mqtt_queue_full`).
    public var maxQueued = 10_000
    /// `raw_advertisements`: the raw radio on `<base>/bridge/radio/<address>` (off by default).
    public var rawAdvertisements = RawAdvertisementSettings()

    /// `mqtt.tls`: files for mqtts.
    public struct TLS: Sendable, Equatable {
        public var caFile: String?
        public var certificateFile: String?
        public var keyFile: String?
        public var insecure = false
    }

    public init() {}

    static let protocols: [String: Int] = ["5": 5, "3.1.1": 3]

    init(_ object: inout ConfigObject) {
        server = object.read("server", default: server) { reader in
            let text = try reader.string()
            try Self.checkServer(text, reader)
            return text
        }
        alternateServers = object.read("alternate_servers", default: alternateServers) { reader in
            let list = try reader.array()
            guard list.count <= 16 else { throw reader.fail("expected at most 16 broker URLs") }
            return try list.map { item in
                let text = try item.string()
                try Self.checkServer(text, item)
                guard text.hasPrefix("mqtts://") == server.hasPrefix("mqtts://") else {
                    throw item.fail("\"\(text)\" does not use the scheme of mqtt.server (all mqtt:// or all mqtts://)")
                }
                guard !text.dropFirst(7).contains("@") else {
                    throw item.fail("\"\(text)\": credentials go in mqtt.server or mqtt.username/password")
                }
                return text
            }
        }
        baseTopic = object.read("base_topic", default: baseTopic) {
            try $0.topicPrefix("a base topic", example: ", e.g. \"gattway\"")
        }
        clientID = object.read("client_id", default: clientID) { try $0.nonEmptyString() }
        username = object.optional("username") { try $0.string() }
        password = object.optional("password") { try $0.string() }
        let passwordFile = object.optional("password_file") { try $0.nonEmptyString() }
        self.passwordFile = passwordFile
        if let passwordFile {
            if password != nil {
                object.problems.add(
                    object.childPath("password_file"), "give either password or password_file, not both")
            } else if let data = LocalFile.read(passwordFile) {
                // The file's first line, so `echo secret > file` works (a trailing newline is not part of it).
                let text = String(decoding: data, as: UTF8.self)
                var line = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
                if line.hasSuffix("\r") { line = line.dropLast() }
                password = String(line)
            } else {
                object.problems.add(
                    object.childPath("password_file"),
                    "cannot read \"\(passwordFile)\" (expected a readable file holding the broker password)")
            }
        }
        protocolVersion = object.read("protocol", default: protocolVersion) { reader in
            let text = try reader.string()
            guard let version = Self.protocols[text] else {
                throw reader.fail("\"\(text)\" is not an MQTT protocol version (expected \"5\" or \"3.1.1\")")
            }
            return version
        }
        keepalive = object.read("keepalive", default: keepalive) { reader in
            let seconds = try reader.duration()
            guard seconds == 0 || (5...65535).contains(seconds) else {
                throw reader.fail("expected 0 (off) or a duration from 5s to 65535s")
            }
            return seconds
        }
        if let value = object.value("tls"), var tlsObject = ConfigObject(value, object.problems) {
            var tls = TLS()
            tls.caFile = tlsObject.optional("ca_file") { try $0.nonEmptyString() }
            tls.certificateFile = tlsObject.optional("cert_file") { try $0.nonEmptyString() }
            tls.keyFile = tlsObject.optional("key_file") { try $0.nonEmptyString() }
            tls.insecure = tlsObject.read("insecure", default: false) { try $0.bool() }
            tlsObject.finish()
            if (tls.certificateFile == nil) != (tls.keyFile == nil) {
                object.problems.add(
                    tlsObject.path, "cert_file and key_file go together (a client certificate needs its key)")
            }
            self.tls = tls
        }
        qos = object.read("qos", default: qos) { try $0.qos() }
        subscriptionQoS = object.read("subscription_qos", default: subscriptionQoS) { try $0.qos() }
        retain = object.read("retain", default: retain) { try $0.bool() }
        attributeTopics = object.read("attribute_topics", default: attributeTopics) { try $0.bool() }
        maxQueued = object.read("max_queued", default: maxQueued) { try $0.integer(in: 0...10_000_000) }
        if let value = object.value("raw_advertisements") {
            rawAdvertisements = RawAdvertisementSettings(value, object.problems)
        }
        object.finish()
        if password != nil && username == nil {
            object.problems.add(object.childPath(passwordFile == nil ? "password" : "password_file"), "needs username")
        }
    }

    static func checkServer(_ text: String, _ reader: JSONReader) throws {
        let rest: Substring
        if text.hasPrefix("mqtt://") {
            rest = text.dropFirst(7)
        } else if text.hasPrefix("mqtts://") {
            rest = text.dropFirst(8)
        } else {
            throw reader.fail("\"\(text)\" is not a broker URL (expected mqtt://host:port or mqtts://host:port)")
        }
        var hostPort = rest.hasSuffix("/") ? rest.dropLast() : rest
        if let at = hostPort.lastIndex(of: "@") { hostPort = hostPort[hostPort.index(after: at)...] }
        guard !hostPort.isEmpty, !hostPort.contains("/"), !hostPort.hasPrefix(":") else {
            throw reader.fail("\"\(text)\" is not a broker URL (expected mqtt://host:port or mqtts://host:port)")
        }
        if !hostPort.hasSuffix("]"), let colon = hostPort.lastIndex(of: ":") {
            let port = hostPort[hostPort.index(after: colon)...]
            guard let number = Int(port), (1...65535).contains(number) else {
                throw reader.fail("\"\(text)\": the port \"\(port)\" is not a number from 1 to 65535")
            }
        }
    }
}
