/// Message type ids of the ESPHome native API, as numbered by the `option (id)` of each message in
/// the public api.proto (esphome/esphome, mirrored by aioesphomeapi). Only the ones gattway reads
/// or writes; anything else a client sends is ignored, as an ESPHome device built without that
/// component ignores it (ESPHomeAPITests' RequestCoverageTests walks every client message).
public enum MessageType {
    public static let helloRequest: UInt16 = 1
    public static let helloResponse: UInt16 = 2
    /// Formerly ConnectRequest (password login). ESPHome 2026.1 stopped answering it, but every
    /// aioesphomeapi before mid-2025 (Home Assistant 2025.4 pins 29.9.0) waits for its answer.
    public static let authenticationRequest: UInt16 = 3
    public static let authenticationResponse: UInt16 = 4
    public static let disconnectRequest: UInt16 = 5
    public static let disconnectResponse: UInt16 = 6
    public static let pingRequest: UInt16 = 7
    public static let pingResponse: UInt16 = 8
    public static let deviceInfoRequest: UInt16 = 9
    public static let deviceInfoResponse: UInt16 = 10
    public static let listEntitiesRequest: UInt16 = 11
    public static let listEntitiesDoneResponse: UInt16 = 19
    public static let subscribeStatesRequest: UInt16 = 20
    public static let subscribeLogsRequest: UInt16 = 28
    public static let subscribeHomeassistantServicesRequest: UInt16 = 34
    public static let getTimeRequest: UInt16 = 36
    public static let getTimeResponse: UInt16 = 37
    public static let subscribeHomeAssistantStatesRequest: UInt16 = 38
    public static let subscribeBluetoothLEAdvertisementsRequest: UInt16 = 66
    public static let bluetoothDeviceRequest: UInt16 = 68
    public static let bluetoothDeviceConnectionResponse: UInt16 = 69
    public static let subscribeBluetoothConnectionsFreeRequest: UInt16 = 80
    public static let bluetoothConnectionsFreeResponse: UInt16 = 81
    public static let unsubscribeBluetoothLEAdvertisementsRequest: UInt16 = 87
    public static let bluetoothDevicePairingResponse: UInt16 = 85
    public static let bluetoothDeviceUnpairingResponse: UInt16 = 86
    public static let bluetoothDeviceClearCacheResponse: UInt16 = 88
    public static let bluetoothLERawAdvertisementsResponse: UInt16 = 93
    public static let noiseEncryptionSetKeyRequest: UInt16 = 124
    public static let noiseEncryptionSetKeyResponse: UInt16 = 125
    public static let bluetoothScannerStateResponse: UInt16 = 126
    public static let bluetoothScannerSetModeRequest: UInt16 = 127
    public static let bluetoothSetConnectionParamsRequest: UInt16 = 145
    public static let bluetoothSetConnectionParamsResponse: UInt16 = 146
    public static let deviceCapabilitiesRequest: UInt16 = 149
    public static let deviceCapabilitiesResponse: UInt16 = 150
}

/// Bits of `bluetooth_proxy_feature_flags` (DeviceInfoResponse field 15), as aioesphomeapi names
/// them (BluetoothProxyFeature); Home Assistant reads them to decide what a proxy can do.
public struct BluetoothProxyFeatures: OptionSet, Sendable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    public static let passiveScan = BluetoothProxyFeatures(rawValue: 1 << 0)
    public static let activeConnections = BluetoothProxyFeatures(rawValue: 1 << 1)
    public static let remoteCaching = BluetoothProxyFeatures(rawValue: 1 << 2)
    public static let pairing = BluetoothProxyFeatures(rawValue: 1 << 3)
    public static let cacheClearing = BluetoothProxyFeatures(rawValue: 1 << 4)
    public static let rawAdvertisements = BluetoothProxyFeatures(rawValue: 1 << 5)
    public static let stateAndMode = BluetoothProxyFeatures(rawValue: 1 << 6)
    /// CONNECTION_PARAMS_SETTING: BluetoothSetConnectionParamsRequest changes a live link. Not
    /// announced by gattway: Linux 6.1 beside bluetoothd gives it no way to (docs/bluez.md §7.2);
    /// bleak-esphome then skips the request with a warning instead of failing on its answer.
    public static let connectionParams = BluetoothProxyFeatures(rawValue: 1 << 7)
}

/// `SubscribeBluetoothLEAdvertisementsRequest.flags`: bit 0 asks for raw advertisements.
public enum BluetoothSubscriptionFlag {
    public static let rawAdvertisements: UInt32 = 1
}

/// BluetoothScannerState and BluetoothScannerMode enums of api.proto.
public enum BluetoothScannerState: UInt32, Sendable {
    case idle = 0, starting, running, failed, stopping, stopped
}

public enum BluetoothScannerMode: UInt32, Sendable {
    case passive = 0, active = 1
}

/// What BluetoothScannerStateResponse reports: the scanner's state, the mode it scans in now and
/// the mode it is configured for (`bluetooth.scan_mode`; Home Assistant warns when its own
/// setting differs from the configured one).
public struct ScannerStatus: Sendable, Equatable {
    public var state: BluetoothScannerState
    public var mode: BluetoothScannerMode
    public var configuredMode: BluetoothScannerMode

    public init(state: BluetoothScannerState, mode: BluetoothScannerMode, configuredMode: BluetoothScannerMode? = nil) {
        self.state = state
        self.mode = mode
        self.configuredMode = configuredMode ?? mode
    }
}
