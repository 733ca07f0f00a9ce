import Bluetooth
import Gateway
import GatewayFakes

/// A BLE port that passes everything to an ``InMemoryBLE`` and shows every read and write to
/// `check` before the fake device sees it (``InMemoryBLE``'s log does not name the service).
final class CheckedBLE: BLEPort {
    /// A GATT operation the gateway asked for.
    enum Operation: Sendable { case read, write }

    let inner: InMemoryBLE
    let check: @Sendable (Operation, BluetoothAddress, BLECharacteristic) -> Void
    /// The pairing agent and `pair` / `unpair`, checked (nil: the port does not pair).
    let pairing: CheckedPairing?

    init(
        _ inner: InMemoryBLE, pairing: CheckedPairing? = nil,
        check: @escaping @Sendable (Operation, BluetoothAddress, BLECharacteristic) -> Void
    ) {
        self.inner = inner
        self.pairing = pairing
        self.check = check
    }

    func scan(services: [BluetoothUUID], _ deliver: @escaping @Sendable (BLEDiscovery) -> Void)
        async throws(BLEPortError)
        -> PortRegistration
    {
        try await inner.scan(services: services, deliver)
    }

    func connect(_ address: BluetoothAddress, timeout: Double) async throws(BLEPortError) {
        try await inner.connect(address, timeout: timeout)
    }

    func disconnect(_ address: BluetoothAddress) async { await inner.disconnect(address) }

    func discover(_ address: BluetoothAddress, services: [BluetoothUUID]?) async throws(BLEPortError)
        -> [BLECharacteristic]
    {
        try await inner.discover(address, services: services)
    }

    func notifications(
        _ address: BluetoothAddress, characteristic: BLECharacteristic, _ deliver: @escaping @Sendable ([UInt8]) -> Void
    ) async throws(BLEPortError) -> PortRegistration {
        try await inner.notifications(address, characteristic: characteristic, deliver)
    }

    /// ATT's smallest MTU: a fuzzed notification of 20 bytes that its parser finds too short
    /// takes the cut-notification path (NotificationCut) too.
    func attMTU(_ address: BluetoothAddress) async -> Int? { 23 }

    func read(_ address: BluetoothAddress, characteristic: BLECharacteristic) async throws(BLEPortError) -> [UInt8] {
        check(.read, address, characteristic)
        return try await inner.read(address, characteristic: characteristic)
    }

    func write(_ address: BluetoothAddress, characteristic: BLECharacteristic, value: [UInt8], withResponse: Bool)
        async throws(BLEPortError)
    {
        check(.write, address, characteristic)
        try await inner.write(address, characteristic: characteristic, value: value, withResponse: withResponse)
    }

    func connectionEvents(_ deliver: @escaping @Sendable (BLEConnectionEvent) -> Void) async -> PortRegistration {
        await inner.connectionEvents(deliver)
    }

    func pairingAgent(_ deliver: @escaping @Sendable (BLEPairingEvent) -> Void) async -> PortRegistration {
        pairing?.register(deliver)
        return .none
    }

    func pair(_ address: BluetoothAddress, timeout: Double) async throws(BLEPortError) {
        guard let pairing else { throw BLEPortError(.operationNotSupported, "no pairing") }
        pairing.pairing(address, unpair: false)
    }

    func unpair(_ address: BluetoothAddress) async throws(BLEPortError) {
        guard let pairing else { throw BLEPortError(.operationNotSupported, "no pairing") }
        pairing.pairing(address, unpair: true)
    }
}
