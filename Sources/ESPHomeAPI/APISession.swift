import Bluetooth

/// One client's session without its socket: the transport (framing, Noise), the order of the
/// session (HelloRequest first) and the answers to each message. The server owns one per
/// connection and does the I/O; the fuzz target and tests feed it bytes directly.
public struct APISession {
    public enum Phase: Sendable, Equatable {
        case handshake, awaitingHello, connected
    }

    /// Why a session ends on the client's bytes (each counted by the server).
    public enum Failure: Sendable, Equatable {
        case handshakeRefused
        case oversize(UInt64)
        /// Malformed frames or protobuf, a bad preamble, a message before HelloRequest.
        case protocolError(String)
        /// A plaintext hello to the Noise server: Home Assistant's config flow tries plaintext
        /// first and learns from the answer that the device needs its encryption key. Expected,
        /// not an attack; told as ESPHome tells it.
        case plaintextProbe
        /// A handshake with an all-zero key (32 ASCII "0" from Home Assistant, or 32 zero
        /// bytes): Home Assistant's second try when a device is added,
        /// to read the node name from the server hello before it asks the user for the key.
        /// Refused as any key but the configured one; expected, not a wrong key.
        case zeroKeyProbe
        /// A password in AuthenticationRequest: gattway has none (its key is the Noise key), so
        /// the answer is `invalid_password` and the session ends.
        case passwordRefused
    }

    /// What one call to ``receive(_:scanner:)`` did.
    public struct Outcome: Sendable {
        public var failure: Failure?
        /// Set when this input completed the HelloRequest: the client's description and API version.
        public var hello: (info: String, major: UInt32, minor: UInt32)?
        public var debug: [String] = []
        /// Requests for connections through the proxy, in order, for the server to serve (only
        /// when the features announce active connections; else the session refuses them itself).
        public var proxyRequests: [ProxyRequest] = []
        /// BluetoothScannerSetModeRequest: the mode the client asked for (the server switches
        /// the scan and reports the true mode when it changed).
        public var scannerModeRequest: BluetoothScannerMode?
        /// NoiseEncryptionSetKeyRequest on a proxy with provisioning: the key field as sent, for
        /// the server to check, store and answer (without provisioning the session refuses it).
        public var setKey: [UInt8]?
    }

    /// What a client asks of the proxy's connections (served by ``APIServer`` with its
    /// ``BluetoothProxyBackend``).
    public enum ProxyRequest: Sendable, Equatable {
        case connect(address: UInt64, addressType: UInt32)
        case disconnect(address: UInt64)
        case gatt(GATTRequest)
        case subscribeConnectionsFree
        /// BluetoothSetConnectionParamsRequest for a device, with the parameters as sent.
        case setConnectionParams(address: UInt64, parameters: ConnectionParameters)
        /// BluetoothDeviceRequest 2, 3 and 6 (when the features announce pairing / cache clearing).
        case pair(address: UInt64)
        case unpair(address: UInt64)
        case clearCache(address: UInt64)
    }

    public let configuration: APIServerConfiguration
    public private(set) var phase: Phase
    public private(set) var subscribed = false
    /// The API version the client said it speaks in HelloRequest.
    public private(set) var clientAPIVersion = (major: UInt32(0), minor: UInt32(0))
    /// True once the session is over (a failure, or a Disconnect exchanged): the owner sends
    /// what is in ``outgoing`` and closes.
    public private(set) var closing = false
    public private(set) var transport: APITransport

    /// Bytes to send to the client; the owner takes them.
    public var outgoing: [UInt8] {
        get { transport.outgoing }
        set { transport.outgoing = newValue }
    }

    public init(configuration: APIServerConfiguration) {
        self.init(configuration: configuration, ephemeralKey: nil)
    }

    package init(configuration: APIServerConfiguration, ephemeralKey: [UInt8]?) {
        self.configuration = configuration
        transport = APITransport(
            encryption: configuration.encryption, name: configuration.name, mac: configuration.helloMac,
            maxFrame: configuration.maxFrame, ephemeralKey: ephemeralKey,
            acceptsPlaintext: configuration.provisionable && configuration.plaintextWhileUnprovisioned)
        phase = transport.isReady ? .awaitingHello : .handshake
    }

    /// Feeds received bytes; answers go to ``outgoing``.
    public mutating func receive<C: Collection<UInt8>>(
        _ bytes: C, scanner: ScannerStatus
    ) -> Outcome {
        var outcome = Outcome()
        guard !closing else { return outcome }
        let messages: [(type: UInt16, payload: [UInt8])]
        do {
            messages = try transport.receive(bytes)
        } catch {
            closing = true
            switch error {
            case .handshakeRefused: outcome.failure = .handshakeRefused
            case .frame(.tooLarge(let size)): outcome.failure = .oversize(size)
            case .plaintextClient: outcome.failure = .plaintextProbe
            case .zeroKeyProbe: outcome.failure = .zeroKeyProbe
            default: outcome.failure = .protocolError("\(error)")
            }
            return outcome
        }
        if phase == .handshake, transport.isReady { phase = .awaitingHello }
        for (type, payload) in messages {
            let message: ClientMessage
            do {
                message = try ClientMessage.decode(type: type, payload: payload[...])
            } catch {
                closing = true
                outcome.failure = .protocolError("malformed message \(type): \(error)")
                return outcome
            }
            handle(message, scanner: scanner, &outcome)
            if closing { break }
        }
        return outcome
    }

    /// Queues a message for the client (false before the handshake or when it cannot be framed).
    @discardableResult
    public mutating func send(_ message: ServerMessage) -> Bool { transport.send(message) }

    private mutating func handle(
        _ message: ClientMessage, scanner: ScannerStatus,
        _ outcome: inout Outcome
    ) {
        guard phase == .connected else {
            guard case .hello(let info, let major, let minor) = message else {
                closing = true
                outcome.failure = .protocolError("\(message) before HelloRequest")
                return
            }
            phase = .connected
            send(
                .helloResponse(
                    major: APIServer.apiVersion.major, minor: APIServer.apiVersion.minor,
                    serverInfo: "gattway \(configuration.version)", name: configuration.name))
            outcome.hello = (info, major, minor)
            clientAPIVersion = (major, minor)
            return
        }
        let scannerState = ServerMessage.scannerState(
            scanner.state, mode: scanner.mode, configuredMode: scanner.configuredMode)
        switch message {
        case .hello, .pingResponse, .getTimeResponse, .subscription:
            break
        case .authentication(let password):
            // Answered as ESPHome devices answered it before 2026.1: clients up to mid-2025 wait
            // for it after HelloResponse. No password is ever accepted.
            send(.authenticationResponse(invalidPassword: !password.isEmpty))
            if !password.isEmpty {
                closing = true
                outcome.failure = .passwordRefused
            }
        case .noiseEncryptionSetKey(let key):
            if configuration.provisioning {
                outcome.setKey = key
            } else {
                // The key is the config file's (bluetooth_proxy.encryption_key); a client cannot
                // replace it, as an ESPHome device with its key in YAML refuses it.
                send(.noiseEncryptionSetKeyResponse(success: false))
                outcome.debug.append("asked to store a new encryption key: refused (the key is the config file's)")
            }
        case .bluetoothSetConnectionParams(let address, let parameters):
            if serving {
                outcome.proxyRequests.append(.setConnectionParams(address: address, parameters: parameters))
            } else {
                send(.connectionParams(address: address, error: ProxyFailure.notConnected.code))
            }
        case .unknown(let type):
            outcome.debug.append("message type \(type) ignored")
        case .disconnectRequest:
            send(.empty(MessageType.disconnectResponse))
            closing = true
        case .disconnectResponse:
            closing = true
        case .pingRequest:
            send(.empty(MessageType.pingResponse))
        case .deviceInfoRequest:
            send(.deviceInfoResponse(deviceInfo))
        case .deviceCapabilitiesRequest:
            send(
                .deviceCapabilitiesResponse(
                    features: configuration.features, bluetoothMacAddress: configuration.bluetoothMacAddress))
        case .listEntitiesRequest:
            send(.empty(MessageType.listEntitiesDoneResponse))
        case .subscribeBluetoothLEAdvertisements(let flags):
            subscribed = true
            if flags & BluetoothSubscriptionFlag.rawAdvertisements == 0 {
                outcome.debug.append("asked for parsed advertisements; sending raw ones (as ESPHome does)")
            }
            send(scannerState)
        case .unsubscribeBluetoothLEAdvertisements:
            subscribed = false
        case .subscribeBluetoothConnectionsFree:
            if serving {
                outcome.proxyRequests.append(.subscribeConnectionsFree)
            } else {
                send(.connectionsFree(free: 0, limit: 0, allocated: []))  // no slot offered
            }
        case .bluetoothScannerSetMode(let mode):
            // Answered with the mode as it is now; the server switches the scan and reports the
            // new mode once the radio follows.
            if let mode = BluetoothScannerMode(rawValue: mode) {
                outcome.scannerModeRequest = mode
            } else {
                outcome.debug.append("asked for scanner mode \(mode), which does not exist: ignored")
            }
            send(scannerState)
        case .bluetoothDeviceRequest(let address, let requestType, let addressType):
            // 4 / 5 connect V3 with / without cache (BlueZ keeps its own cache, the client the
            // services it was sent: both connect alike), 1 disconnect, 2 pair, 3 unpair, 6 clear
            // cache; 0, the deprecated V1 connect, is refused as ESPHome refuses it.
            let pairing = serving && configuration.features.contains(.pairing)
            let cacheClearing = serving && configuration.features.contains(.cacheClearing)
            if serving, requestType == 0 {
                // ESPHome since 2025.8 ("V1 connections removed"): connected false, error 0.
                // aioesphomeapi sends it only to a proxy without remote caching, which gattway
                // always announces with connections.
                send(.deviceConnection(address: address, connected: false, mtu: 0, error: 0))
                outcome.debug.append(
                    "deprecated connect (V1) for \(APIServer.text(address)) refused, as ESPHome refuses it: use V3")
            } else if serving, [4, 5].contains(requestType), addressType == nil {
                // ESPHome: "Missing address type in connect request", connected false, error 0.
                send(.deviceConnection(address: address, connected: false, mtu: 0, error: 0))
                outcome.debug.append(
                    "connect for \(APIServer.text(address)) without an address type refused, as ESPHome refuses it")
            } else if serving, [4, 5].contains(requestType), let addressType {
                outcome.proxyRequests.append(.connect(address: address, addressType: addressType))
            } else if serving, requestType == 1 {
                outcome.proxyRequests.append(.disconnect(address: address))
            } else if pairing, requestType == 2 {
                outcome.proxyRequests.append(.pair(address: address))
            } else if pairing, requestType == 3 {
                outcome.proxyRequests.append(.unpair(address: address))
            } else if cacheClearing, requestType == 6 {
                outcome.proxyRequests.append(.clearCache(address: address))
            } else {
                refuseDeviceRequest(address: address, requestType: requestType)
            }
        case .gatt(let request):
            if serving {
                outcome.proxyRequests.append(.gatt(request))
            } else {
                // Without connections through the proxy every device is one it is not connected to.
                send(.gattError(address: request.address, handle: request.handle, error: -1))
            }
        }
    }

    /// Connections through the proxy are served (the features announce them).
    private var serving: Bool { configuration.features.contains(.activeConnections) }

    /// Device requests the proxy does not serve are answered at once with a failure (everything
    /// when connections are not served; pair, unpair and clear cache when not announced).
    private mutating func refuseDeviceRequest(address: UInt64, requestType: UInt32) {
        let notSupported: Int32 = 6  // ESP_GATT_REQ_NOT_SUPPORTED, in the ESP-IDF codes ESPHome reports
        let connectFailed: Int32 = 0x85  // ESP_GATT_ERROR: "Connection failed due to GATT operation error"
        switch requestType {
        case 2: send(.devicePairing(address: address, paired: false, error: notSupported))
        case 3: send(.deviceUnpairing(address: address, success: false, error: notSupported))
        case 6: send(.deviceClearCache(address: address, success: false, error: notSupported))
        case 1:  // disconnect: nothing is connected
            send(.deviceConnection(address: address, connected: false, mtu: 0, error: 0))
        default:  // connect, with or without cache
            send(.deviceConnection(address: address, connected: false, mtu: 0, error: connectFailed))
        }
    }

    private var deviceInfo: ServerMessage.DeviceInfo {
        let encrypted: Bool
        if case .noise = configuration.encryption { encrypted = true } else { encrypted = false }
        var info = ServerMessage.DeviceInfo(
            name: configuration.name, friendlyName: configuration.friendlyName, macAddress: configuration.macAddress,
            bluetoothMacAddress: configuration.bluetoothMacAddress, esphomeVersion: APIServer.esphomeVersion,
            compilationTime: "", model: "gattway", manufacturer: "gattway", projectName: "gattway.gattway",
            projectVersion: configuration.version, bluetoothProxyFeatures: configuration.features,
            apiEncryptionSupported: encrypted)
        info.apiEncryptionProvisionable = configuration.provisionable
        return info
    }
}
