import JSON

/// `bluetooth_proxy` in config.json: the ESPHome native API server that makes the gateway a
/// Home Assistant Bluetooth proxy (docs/ha-bluetooth-proxy.md). The Gateway core does not run it;
/// `gattway run` starts it beside the core when `enabled`.
public struct BluetoothProxySettings: Sendable, Equatable {
    public var enabled = false
    /// `listen`: IPv4 address and TCP port, "0.0.0.0:6053" by default (ESPHome's port).
    public var host = "0.0.0.0"
    public var port: UInt16 = 6053
    /// `name`: the node name Home Assistant shows; nil: the host name.
    public var name: String?
    /// `encryption_key`: the 32-byte Noise pre-shared key (base64 in the file, as Home Assistant's
    /// esphome integration asks for it).
    public var encryptionKey: [UInt8]?
    /// The key as written in the file (a secret: redacted from logs).
    public var encryptionKeyText: String?
    /// `plaintext`: serve without encryption; must be chosen explicitly. With `provisioning`:
    /// plaintext clients are served only while no key is set (as an ESPHome device without a key).
    public var plaintext = false
    /// `provisioning`: without `encryption_key`, keyless adoption: the proxy accepts the all-zero
    /// key until a client (Home Assistant) sets one, which is kept in the state directory. Off by
    /// default: until then anyone on the network can take the proxy (docs/ha-bluetooth-proxy.md).
    public var provisioning = false
    /// `max_clients`: API connections at once; more are refused.
    public var maxClients = 4
    /// `connection_slots`: GATT connections the proxy may hold for its clients.
    public var connectionSlots = 3

    public init() {}

    init(_ object: inout ConfigObject) {
        enabled = object.read("enabled", default: enabled) { try $0.bool() }
        if let (host, port) = object.optional("listen", { try $0.listenAddress() }) {
            self.host = host
            self.port = port
        }
        name = object.optional("name") { reader in
            let text = try reader.nonEmptyString()
            // ESPHome node names: at most 31 characters, carried in the Noise hello up to a NUL.
            guard text.utf8.count <= 31, !text.utf8.contains(0) else {
                throw reader.fail("expected at most 31 characters without NUL")
            }
            return text
        }
        if let (key, text) = object.optional(
            "encryption_key",
            { reader -> ([UInt8], String) in
                let text = try reader.string()
                guard let key = Base64.decode(text), key.count == 32 else {
                    throw reader.fail("expected the base64 of 32 bytes (e.g. from: openssl rand -base64 32)")
                }
                return (key, text)
            })
        {
            encryptionKey = key
            encryptionKeyText = text
        }
        plaintext = object.read("plaintext", default: plaintext) { try $0.bool() }
        provisioning = object.read("provisioning", default: provisioning) { try $0.bool() }
        maxClients = object.read("max_clients", default: maxClients) { try $0.integer(in: 1...64) }
        connectionSlots = object.read("connection_slots", default: connectionSlots) { try $0.integer(in: 0...32) }
        if enabled, encryptionKey == nil, !plaintext, !provisioning {
            object.problems.add(
                object.childPath("encryption_key"),
                "is required when enabled (or set \"provisioning\": true to let Home Assistant set one, or "
                    + "\"plaintext\": true to serve without encryption on a trusted network)"
            )
        }

        if encryptionKey != nil, plaintext {
            object.problems.add(object.childPath("plaintext"), "is true but encryption_key is set (choose one)")
        }
        object.finish()
    }
}

extension JSONReader {
    /// "host:port" with an IPv4 address and a port 1–65535.
    func listenAddress() throws -> (String, UInt16) {
        let text = try string()
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        let octets = parts.first?.split(separator: ".", omittingEmptySubsequences: false) ?? []
        guard parts.count == 2, octets.count == 4,
            octets.allSatisfy({ $0.count <= 3 && UInt8($0) != nil }),
            let port = UInt16(parts[1]), port > 0
        else {
            throw fail("\"\(text)\" is not an IPv4 address and port (expected e.g. \"0.0.0.0:6053\")")
        }
        return (String(parts[0]), port)
    }
}
