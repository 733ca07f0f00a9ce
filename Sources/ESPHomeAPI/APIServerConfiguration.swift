/// What the API server needs to know; `gattway run` builds it from `bluetooth_proxy`.
public struct APIServerConfiguration: Sendable {
    /// IPv4 address to listen on ("0.0.0.0", "127.0.0.1" in tests) and the port (0: any free one).
    public var host: String
    public var port: UInt16
    public var encryption: APITransport.Encryption
    /// Keyless adoption (`bluetooth_proxy.provisioning`): a client may set the key
    /// (NoiseEncryptionSetKeyRequest), which the server keeps in its ``APIKeyStore``. While
    /// `encryption` holds ``APIKey/zero`` the proxy is unprovisioned: it says so in DeviceInfo and
    /// mDNS. False: the key is `encryption`'s (the config file's) and a set-key is refused.
    public var provisioning = false
    /// While unprovisioned, plaintext clients are served too (`plaintext` with `provisioning`: what
    /// an ESPHome device without a key does, and how Home Assistant's config flow adds one); a
    /// key is never accepted from them.
    public var plaintextWhileUnprovisioned = false
    /// The node name (HelloResponse, DeviceInfoResponse, the Noise server hello).
    public var name: String
    public var friendlyName: String
    /// "AA:BB:CC:DD:EE:FF": the device's MAC and its Bluetooth adapter's (usually the same here).
    public var macAddress: String
    public var bluetoothMacAddress: String
    /// gattway's version, in server_info and project_version.
    public var version: String
    public var maxClients: Int
    /// GATT connections through the proxy its clients may hold at once (with a
    /// ``BluetoothProxyBackend``; 0: none are offered).
    public var connectionSlots: Int
    /// The largest frame payload a client may send; larger frames close the connection.
    public var maxFrame = 16 * 1024
    /// Bytes waiting to be written to one client beyond which it is disconnected as too slow.
    public var maxQueuedBytes = 256 * 1024
    /// Seconds from accept to a finished handshake and HelloRequest.
    public var handshakeTimeout: Double = 10
    /// Seconds without a byte from an established client before it is closed (Home Assistant
    /// pings every 20 s or so).
    public var idleTimeout: Double = 90
    /// The proxy features announced in DeviceInfoResponse (what gattway serves today); the server
    /// adds active connections and remote caching when it has a backend and slots.
    public var features: BluetoothProxyFeatures = [.passiveScan, .rawAdvertisements, .stateAndMode]

    public init(
        host: String, port: UInt16, encryption: APITransport.Encryption, name: String, friendlyName: String,
        macAddress: String, bluetoothMacAddress: String, version: String, maxClients: Int, connectionSlots: Int
    ) {
        self.host = host
        self.port = port
        self.encryption = encryption
        self.name = name
        self.friendlyName = friendlyName
        self.macAddress = macAddress
        self.bluetoothMacAddress = bluetoothMacAddress
        self.version = version
        self.maxClients = maxClients
        self.connectionSlots = connectionSlots
    }

    /// Unprovisioned: keys may be set and the key now is the all-zero one.
    public var provisionable: Bool {
        guard provisioning, case .noise(let psk) = encryption else { return false }
        return psk == APIKey.zero
    }

    /// The MAC as the Noise server hello carries it: 12 lower-case hex digits.
    var helloMac: String { String(macAddress.lowercased().filter { $0 != ":" }) }
}

/// Counters of the API server, for logs and `bridge/health`.
public struct APIServerStatistics: Sendable, Equatable {
    /// Clients connected now.
    public var clients = 0
    /// Connections accepted since the start.
    public var accepted = 0
    /// Connections refused because `max_clients` were connected.
    public var refusedFull = 0
    /// Noise handshakes refused (almost always: a wrong key).
    public var handshakeFailures = 0
    /// Connections closed for malformed frames or protobuf, bad preambles or messages out of order.
    public var protocolErrors = 0
    /// Plaintext hellos to the Noise server, answered with "encryption required" and closed: the
    /// probe Home Assistant's config flow makes before it asks for the key (not an error).
    public var plaintextProbes = 0
    /// Noise handshakes with the all-zero key, refused: the second probe of Home Assistant's
    /// config flow, which reads the node name from the server hello (not a wrong key).
    public var zeroKeyProbes = 0
    /// NoiseEncryptionSetKeyRequests that stored or forgot a key, and those refused (a key in
    /// the config file, no provisioning, a malformed or zero key, a session whose key is no
    /// longer the proxy's, a file that could not be written).
    public var keysSet = 0
    public var keysRefused = 0
    /// Sessions that sent a password (AuthenticationRequest), refused and closed.
    public var passwordsRefused = 0
    /// Connections closed for a frame over the size limit.
    public var oversizeFrames = 0
    /// Connections closed for saying nothing (no handshake in time, or idle).
    public var idleTimeouts = 0
    /// Clients disconnected because their send queue exceeded its bound.
    public var slowClients = 0
    /// Advertisements written to clients (one per client that got it).
    public var advertisementsSent = 0
    /// Connections through the proxy now (connecting or connected).
    public var proxyConnections = 0
    /// Connects through the proxy that came up, and those that failed or were refused (no slot,
    /// another client's device, unknown to BlueZ, BlueZ's failure).
    public var proxyConnects = 0
    public var proxyConnectFailures = 0
    /// Times a client's socket was not read because a connection of its had 16 GATT requests
    /// waiting for BlueZ (back-pressure on a bulk transfer, docs/ha-bluetooth-proxy.md).
    public var heldBack = 0

    public init() {}
}
