import Bluetooth

/// The messages gattway's API server reads (from a client such as Home Assistant) and writes, with
/// the field numbers of api.proto. Decoding skips unknown fields and refuses a known field with the
/// wrong wire type.

/// A message from a client, decoded by its type id.
public enum ClientMessage: Equatable, Sendable {
    case hello(clientInfo: String, apiVersionMajor: UInt32, apiVersionMinor: UInt32)
    /// AuthenticationRequest (the old ConnectRequest), with the password it carries ("" for none).
    /// Clients before mid-2025 send it right after HelloRequest and wait for its answer.
    case authentication(password: String)
    /// NoiseEncryptionSetKeyRequest: a new encryption key for the device to store, as the client
    /// sent it (Home Assistant: the 44 characters of its base64; empty: forget the stored key).
    case noiseEncryptionSetKey(key: [UInt8])
    /// BluetoothSetConnectionParamsRequest: connection interval, latency and timeout for a device
    /// (as sent, not validated; a value above 65535 is kept as 65535, outside every range).
    case bluetoothSetConnectionParams(address: UInt64, parameters: ConnectionParameters)
    case disconnectRequest
    case disconnectResponse
    case pingRequest
    case pingResponse
    case deviceInfoRequest
    case deviceCapabilitiesRequest
    case listEntitiesRequest
    /// SubscribeStates, SubscribeLogs, SubscribeHomeassistantServices, SubscribeHomeAssistantStates:
    /// a proxy without entities has nothing to send for them.
    case subscription(type: UInt16)
    case getTimeResponse(epochSeconds: UInt32)
    case subscribeBluetoothLEAdvertisements(flags: UInt32)
    case unsubscribeBluetoothLEAdvertisements
    case subscribeBluetoothConnectionsFree
    case bluetoothScannerSetMode(mode: UInt32)
    /// BluetoothDeviceRequest: `addressType` (0 public, 1 random) only when the client set
    /// `has_address_type` (bleak-esphome's connects do; ESPHome refuses a V3 connect without it).
    case bluetoothDeviceRequest(address: UInt64, requestType: UInt32, addressType: UInt32?)
    /// A GATT request (get services, read, write, descriptors, notify) by ATT handle.
    case gatt(GATTRequest)
    /// A type id gattway does not handle (the payload is not parsed).
    case unknown(type: UInt16)

    /// Decodes the payload of a message of type `type`.
    public static func decode(type: UInt16, payload: ArraySlice<UInt8>) throws(ProtobufError) -> ClientMessage {
        var reader = ProtobufReader(payload)
        switch type {
        case MessageType.helloRequest:
            var info = ""
            var major: UInt32 = 0
            var minor: UInt32 = 0
            while let (field, value) = try reader.next() {
                switch field {
                case 1: info = try value.string(field: field)
                case 2: major = try value.uint32(field: field)
                case 3: minor = try value.uint32(field: field)
                default: break
                }
            }
            return .hello(clientInfo: info, apiVersionMajor: major, apiVersionMinor: minor)
        case MessageType.getTimeResponse:
            var seconds: UInt32 = 0
            while let (field, value) = try reader.next() {
                if field == 1 { seconds = try value.fixed32(field: field) }
            }
            return .getTimeResponse(epochSeconds: seconds)
        case MessageType.subscribeBluetoothLEAdvertisementsRequest:
            var flags: UInt32 = 0
            while let (field, value) = try reader.next() {
                if field == 1 { flags = try value.uint32(field: field) }
            }
            return .subscribeBluetoothLEAdvertisements(flags: flags)
        case MessageType.bluetoothScannerSetModeRequest:
            var mode: UInt32 = 0
            while let (field, value) = try reader.next() {
                if field == 1 { mode = try value.uint32(field: field) }
            }
            return .bluetoothScannerSetMode(mode: mode)
        case MessageType.bluetoothDeviceRequest:
            var address: UInt64 = 0
            var requestType: UInt32 = 0
            var hasAddressType = false
            var addressType: UInt32 = 0
            while let (field, value) = try reader.next() {
                switch field {
                case 1: address = try value.varint(field: field)
                case 2: requestType = try value.uint32(field: field)
                case 3: hasAddressType = try value.bool(field: field)
                case 4: addressType = try value.uint32(field: field)
                default: break
                }
            }
            return .bluetoothDeviceRequest(
                address: address, requestType: requestType, addressType: hasAddressType ? addressType : nil)
        case MessageType.authenticationRequest:
            var password = ""
            while let (field, value) = try reader.next() {
                if field == 1 { password = try value.string(field: field) }
            }
            return .authentication(password: password)
        case MessageType.noiseEncryptionSetKeyRequest:
            var key: [UInt8] = []
            while let (field, value) = try reader.next() {
                // At most a little more than a key is kept: anything longer is refused anyway.
                if field == 1 { key = Array(try value.bytes(field: field).prefix(APIKey.textLength + 1)) }
            }
            return .noiseEncryptionSetKey(key: key)
        case MessageType.bluetoothSetConnectionParamsRequest:
            var address: UInt64 = 0
            var parameters = ConnectionParameters(minInterval: 0, maxInterval: 0, latency: 0, supervisionTimeout: 0)
            // Fields: address 1, min_interval 2, max_interval 3, latency 4, timeout 5 (uint32).
            while let (field, value) = try reader.next() {
                switch field {
                case 1: address = try value.varint(field: field)
                case 2: parameters.minInterval = UInt16(clamping: try value.uint32(field: field))
                case 3: parameters.maxInterval = UInt16(clamping: try value.uint32(field: field))
                case 4: parameters.latency = UInt16(clamping: try value.uint32(field: field))
                case 5: parameters.supervisionTimeout = UInt16(clamping: try value.uint32(field: field))
                default: break
                }
            }
            return .bluetoothSetConnectionParams(address: address, parameters: parameters)
        case _ where GATTRequest.types.contains(type):
            return .gatt(try GATTRequest.decode(type: type, payload: payload))
        default:
            break
        }
        let message: ClientMessage
        switch type {
        case MessageType.disconnectRequest: message = .disconnectRequest
        case MessageType.disconnectResponse: message = .disconnectResponse
        case MessageType.pingRequest: message = .pingRequest
        case MessageType.pingResponse: message = .pingResponse
        case MessageType.deviceInfoRequest: message = .deviceInfoRequest
        case MessageType.deviceCapabilitiesRequest: message = .deviceCapabilitiesRequest
        case MessageType.listEntitiesRequest: message = .listEntitiesRequest
        case MessageType.subscribeStatesRequest, MessageType.subscribeLogsRequest,
            MessageType.subscribeHomeassistantServicesRequest, MessageType.subscribeHomeAssistantStatesRequest:
            message = .subscription(type: type)
        case MessageType.unsubscribeBluetoothLEAdvertisementsRequest: message = .unsubscribeBluetoothLEAdvertisements
        case MessageType.subscribeBluetoothConnectionsFreeRequest: message = .subscribeBluetoothConnectionsFree
        // Not parsed: gattway does not know its fields.
        default: return .unknown(type: type)
        }
        // Messages without fields gattway reads: still checked to be well-formed protobuf.
        while try reader.next() != nil {}
        return message
    }
}

/// A message to a client: its type id and protobuf payload.
public struct ServerMessage: Equatable, Sendable {
    public var type: UInt16
    public var payload: [UInt8]

    public init(type: UInt16, payload: [UInt8]) {
        self.type = type
        self.payload = payload
    }

    public static func empty(_ type: UInt16) -> ServerMessage { ServerMessage(type: type, payload: []) }

    /// HelloResponse: the API version, server_info (a version string) and the node name.
    public static func helloResponse(major: UInt32, minor: UInt32, serverInfo: String, name: String) -> ServerMessage {
        var writer = ProtobufWriter()
        writer.uint32(1, major)
        writer.uint32(2, minor)
        writer.string(3, serverInfo, always: true)
        writer.string(4, name, always: true)
        return ServerMessage(type: MessageType.helloResponse, payload: writer.bytes)
    }

    /// What DeviceInfoResponse carries for a Bluetooth proxy.
    public struct DeviceInfo: Equatable, Sendable {
        public var name: String
        public var friendlyName: String
        /// "AA:BB:CC:DD:EE:FF", upper case.
        public var macAddress: String
        public var bluetoothMacAddress: String
        public var esphomeVersion: String
        public var compilationTime: String
        public var model: String
        public var manufacturer: String
        public var projectName: String
        public var projectVersion: String
        public var bluetoothProxyFeatures: BluetoothProxyFeatures
        public var apiEncryptionSupported: Bool
        /// `api_encryption_provisionable`: no key yet, a client may set one over a Noise session
        /// with the all-zero key (``APIKey/zero``).
        public var apiEncryptionProvisionable = false

        public init(
            name: String, friendlyName: String, macAddress: String, bluetoothMacAddress: String,
            esphomeVersion: String, compilationTime: String, model: String, manufacturer: String,
            projectName: String, projectVersion: String, bluetoothProxyFeatures: BluetoothProxyFeatures,
            apiEncryptionSupported: Bool
        ) {
            self.name = name
            self.friendlyName = friendlyName
            self.macAddress = macAddress
            self.bluetoothMacAddress = bluetoothMacAddress
            self.esphomeVersion = esphomeVersion
            self.compilationTime = compilationTime
            self.model = model
            self.manufacturer = manufacturer
            self.projectName = projectName
            self.projectVersion = projectVersion
            self.bluetoothProxyFeatures = bluetoothProxyFeatures
            self.apiEncryptionSupported = apiEncryptionSupported
        }
    }

    public static func deviceInfoResponse(_ info: DeviceInfo) -> ServerMessage {
        var writer = ProtobufWriter()
        writer.string(2, info.name, always: true)
        writer.string(3, info.macAddress, always: true)
        writer.string(4, info.esphomeVersion, always: true)
        writer.string(5, info.compilationTime, always: true)
        writer.string(6, info.model, always: true)
        writer.string(8, info.projectName)
        writer.string(9, info.projectVersion)
        writer.string(12, info.manufacturer, always: true)
        writer.string(13, info.friendlyName, always: true)
        writer.uint32(15, info.bluetoothProxyFeatures.rawValue)
        writer.string(18, info.bluetoothMacAddress)
        writer.bool(19, info.apiEncryptionSupported)
        writer.bool(26, info.apiEncryptionProvisionable)
        return ServerMessage(type: MessageType.deviceInfoResponse, payload: writer.bytes)
    }

    /// DeviceCapabilitiesResponse (API 1.15): the Bluetooth proxy's flags and MAC in a sub-message.
    public static func deviceCapabilitiesResponse(features: BluetoothProxyFeatures, bluetoothMacAddress: String)
        -> ServerMessage
    {
        var proxy = ProtobufWriter()
        proxy.uint32(1, features.rawValue)
        proxy.string(2, bluetoothMacAddress, always: true)
        var writer = ProtobufWriter()
        writer.message(1, proxy)
        return ServerMessage(type: MessageType.deviceCapabilitiesResponse, payload: writer.bytes)
    }

    /// One advertisement of a BluetoothLERawAdvertisementsResponse.
    public struct RawAdvertisement: Equatable, Sendable {
        /// The 48-bit address, most significant byte first as in "AA:BB:…" (0xAABBCCDDEEFF).
        public var address: UInt64
        public var rssi: Int32
        /// 0 public, 1 random (as ESPHome reports it).
        public var addressType: UInt32
        /// The AD structures (length, type, data)…, at most 62 bytes (advertising data plus scan
        /// response).
        public var data: [UInt8]

        public init(address: UInt64, rssi: Int32, addressType: UInt32, data: [UInt8]) {
            self.address = address
            self.rssi = rssi
            self.addressType = addressType
            self.data = data
        }
    }

    public static func rawAdvertisements(_ advertisements: [RawAdvertisement]) -> ServerMessage {
        var writer = ProtobufWriter()
        for advertisement in advertisements {
            var entry = ProtobufWriter()
            entry.varint(1, advertisement.address, always: true)
            entry.sint32(2, advertisement.rssi, always: true)
            entry.uint32(3, advertisement.addressType)
            entry.bytes(4, advertisement.data, always: true)
            writer.message(1, entry, always: true)
        }
        return ServerMessage(type: MessageType.bluetoothLERawAdvertisementsResponse, payload: writer.bytes)
    }

    public static func connectionsFree(free: UInt32, limit: UInt32, allocated: [UInt64]) -> ServerMessage {
        var writer = ProtobufWriter()
        writer.uint32(1, free)
        writer.uint32(2, limit)
        // Repeated scalar fields are packed in proto3; parsers accept both forms.
        if !allocated.isEmpty {
            var packed: [UInt8] = []
            for address in allocated { Protobuf.appendVarint(address, to: &packed) }
            writer.bytes(3, packed)
        }
        return ServerMessage(type: MessageType.bluetoothConnectionsFreeResponse, payload: writer.bytes)
    }

    public static func scannerState(
        _ state: BluetoothScannerState, mode: BluetoothScannerMode, configuredMode: BluetoothScannerMode
    ) -> ServerMessage {
        var writer = ProtobufWriter()
        writer.uint32(1, state.rawValue)
        writer.uint32(2, mode.rawValue)
        writer.uint32(3, configuredMode.rawValue)
        return ServerMessage(type: MessageType.bluetoothScannerStateResponse, payload: writer.bytes)
    }

    /// BluetoothDevicePairingResponse: `paired`, or the error.
    public static func devicePairing(address: UInt64, paired: Bool, error: Int32) -> ServerMessage {
        deviceOutcome(MessageType.bluetoothDevicePairingResponse, address: address, ok: paired, error: error)
    }

    /// BluetoothDeviceUnpairingResponse: `success`, or the error.
    public static func deviceUnpairing(address: UInt64, success: Bool, error: Int32) -> ServerMessage {
        deviceOutcome(MessageType.bluetoothDeviceUnpairingResponse, address: address, ok: success, error: error)
    }

    /// BluetoothDeviceClearCacheResponse: `success`, or the error.
    public static func deviceClearCache(address: UInt64, success: Bool, error: Int32) -> ServerMessage {
        deviceOutcome(MessageType.bluetoothDeviceClearCacheResponse, address: address, ok: success, error: error)
    }

    /// The three answers above share their fields: address (1), paired / success (2), error (3).
    private static func deviceOutcome(_ type: UInt16, address: UInt64, ok: Bool, error: Int32) -> ServerMessage {
        var writer = ProtobufWriter()
        writer.varint(1, address)
        writer.bool(2, ok)
        writer.int32(3, error)
        return ServerMessage(type: type, payload: writer.bytes)
    }

    /// AuthenticationResponse (the old ConnectResponse): empty when no password was sent, else
    /// `invalid_password` — gattway has no password (its key is the Noise encryption key).
    public static func authenticationResponse(invalidPassword: Bool) -> ServerMessage {
        var writer = ProtobufWriter()
        writer.bool(1, invalidPassword)
        return ServerMessage(type: MessageType.authenticationResponse, payload: writer.bytes)
    }

    /// NoiseEncryptionSetKeyResponse: `success` (false: the key stays the one in the config file).
    public static func noiseEncryptionSetKeyResponse(success: Bool) -> ServerMessage {
        var writer = ProtobufWriter()
        writer.bool(1, success)
        return ServerMessage(type: MessageType.noiseEncryptionSetKeyResponse, payload: writer.bytes)
    }

    /// BluetoothSetConnectionParamsResponse: the device and an error (0 when the parameters were
    /// applied).
    public static func connectionParams(address: UInt64, error: Int32) -> ServerMessage {
        var writer = ProtobufWriter()
        writer.varint(1, address)
        writer.int32(2, error)
        return ServerMessage(type: MessageType.bluetoothSetConnectionParamsResponse, payload: writer.bytes)
    }

    /// BluetoothDeviceConnectionResponse: `connected` false with an error for a refused connect.
    public static func deviceConnection(address: UInt64, connected: Bool, mtu: UInt32, error: Int32) -> ServerMessage {
        var writer = ProtobufWriter()
        writer.varint(1, address)
        writer.bool(2, connected)
        writer.uint32(3, mtu)
        writer.int32(4, error)
        return ServerMessage(type: MessageType.bluetoothDeviceConnectionResponse, payload: writer.bytes)
    }
}
