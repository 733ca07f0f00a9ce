import Bluetooth

/// What the gateway needs from a Bluetooth LE central (docs/architecture.md), in the shape the
/// BlueZ `CentralManager` offers it: continuous scanning, connections by address, GATT
/// discovery, reads, writes and notifications.
///
/// Inputs are pushed, not pulled: ``scan(services:_:)``, ``notifications(_:characteristic:_:)``
/// and ``connectionEvents(_:)`` take a `deliver` closure that the port calls for each report.
/// A production port calls it on the gateway's event loop thread, inside the handling of the
/// D-Bus signal or `AcquireNotify` datagram that carried it (no stream, no task, no buffer in
/// between); the gateway then handles it at once. A port may call it on any other thread (test
/// fakes do): the gateway queues the input to its loop.
///
/// Contract for an implementation:
/// - ``scan(services:_:)`` scans continuously (never stop/start cycles) until the returned
///   registration is cancelled. The service filter is a hint: the gateway filters again,
///   because BlueZ merges the filters of every client on the adapter. A scan asked for while
///   the adapter cannot be used (off, blocked, missing, bluetoothd gone) is kept and starts by
///   itself once it can; ``connectionEvents(_:)`` tells the adapter's condition meanwhile.
/// - ``connect(_:timeout:)`` returns once the link is up and services are resolved; it throws
///   ``BLEPortError`` (kind `connectionTimeout` after `timeout`). The gateway decides when to
///   retry (``ReconnectStrategy``); the port does not reconnect on its own.
/// - Every link that drops after a successful connect — and every link the gateway ends with
///   ``disconnect(_:)`` — is reported once through ``connectionEvents(_:)``.
/// - ``notifications(_:characteristic:_:)`` enables notifications (or indications) and delivers
///   their values in order until the registration is cancelled or the link drops.
/// - The async methods are called from the gateway's jobs and must honour task cancellation.
///   They may be called concurrently for different devices; for one device the gateway
///   serialises GATT operations itself.
public protocol BLEPort: Sendable {
    /// Starts (or joins) continuous discovery with a service filter (empty: every device).
    func scan(services: [BluetoothUUID], _ deliver: @escaping @Sendable (BLEDiscovery) -> Void)
        async throws(BLEPortError)
        -> PortRegistration

    /// As ``scan(services:_:)``; with `raw` each discovery also carries what the raw radio
    /// (``RadioView``) shows: ``BLEDiscovery/data`` (the AD bytes as the controller gave them,
    /// where the port has them). Without `raw` a port leaves it nil, so the hot path carries
    /// nothing more. ``BLEDiscovery/addressType`` is given whenever the port knows it (presence
    /// needs it). The default ignores `raw`.
    func scan(services: [BluetoothUUID], raw: Bool, _ deliver: @escaping @Sendable (BLEDiscovery) -> Void)
        async throws(BLEPortError)
        -> PortRegistration

    /// Connects to `address` and resolves its services, failing after `timeout` seconds.
    func connect(_ address: BluetoothAddress, timeout: Double) async throws(BLEPortError)

    /// Makes the next connect to `address` ask for `parameters` (a rule's `connection_params`),
    /// called right before ``connect(_:timeout:)``; throws when the port cannot (optional: the
    /// default implementation throws `operationNotSupported`).
    func loadConnectionParameters(_ parameters: ConnectionParameters, for address: BluetoothAddress)
        async throws(BLEPortError)

    /// Makes the links to `address` go through the adapter named `adapter` (as in
    /// `bluetooth.adapters`) while its last report of the device is recent and at or above
    /// `floorDBm` (a rule's `prefer_adapter` and `prefer_floor_dbm`); called right before
    /// ``connect(_:timeout:)`` (optional: the default does nothing, for a port of one adapter).
    func preferAdapter(_ adapter: String, floorDBm: Int, for address: BluetoothAddress)

    /// Ends the link to `address` (no-op when not connected).
    func disconnect(_ address: BluetoothAddress) async

    /// The characteristics of a connected device, optionally only under `services`.
    func discover(_ address: BluetoothAddress, services: [BluetoothUUID]?) async throws(BLEPortError)
        -> [BLECharacteristic]

    /// Enables notifications of `characteristic` and hands every value to `deliver`.
    func notifications(
        _ address: BluetoothAddress, characteristic: BLECharacteristic, _ deliver: @escaping @Sendable ([UInt8]) -> Void
    ) async throws(BLEPortError) -> PortRegistration

    /// Reads the value of `characteristic`.
    func read(_ address: BluetoothAddress, characteristic: BLECharacteristic) async throws(BLEPortError) -> [UInt8]

    /// Writes `value` to `characteristic`, as a Write Request (`withResponse`) or a Write Command.
    func write(_ address: BluetoothAddress, characteristic: BLECharacteristic, value: [UInt8], withResponse: Bool)
        async throws(BLEPortError)

    /// Hands every link that came up or went down to `deliver` (first a `.connected` for each
    /// link up now), until the registration is cancelled.
    func connectionEvents(_ deliver: @escaping @Sendable (BLEConnectionEvent) -> Void) async -> PortRegistration

    /// Seconds of a recent round trip to bluetoothd, for `bridge/health` (optional: the
    /// default implementation returns nil).
    func lastRoundTripLatency() -> Double?

    /// The devices the previous run of the process had links to (connected, connecting, or
    /// subscribed to), as the port saved them (state restoration), with what is remembered of
    /// each for matching device rules; asked once at start (optional: the default is none).
    func restoredDevices() async -> [BLEDiscovery]

    /// The gateway's answer to ``restoredDevices()``, once at start, after it asked for the
    /// connections it wants: the restored `devices` stay saved (a crash before their link is up
    /// restores them again), and so do the saved subscriptions `wanted` accepts (a device's
    /// address and characteristic) until the gateway subscribes again; the others — devices no
    /// rule connects now, characteristics no rule subscribes to — are forgotten and not
    /// restored again (optional: the default does nothing).
    func keepRestored(
        devices: Set<BluetoothAddress>, _ wanted: @escaping @Sendable (BluetoothAddress, BLECharacteristic) -> Bool
    ) async

    /// The ATT MTU of the link to `address`, when the port knows it (optional: the default is
    /// nil). A notification carries at most MTU − 3 bytes of the value: the rest is cut.
    func attMTU(_ address: BluetoothAddress) async -> Int?

    /// The gateway stops cleanly (before it ends its links): the port saves what the next
    /// start restores — the links up now — and keeps it through the disconnects of the stop
    /// (optional: the default does nothing).
    func keepStateForRestart() async

    /// Starts the pairing agent: its questions (and their withdrawals) go to `deliver` until the
    /// registration is cancelled, which withdraws what is still unanswered (optional: the default
    /// asks nothing).
    func pairingAgent(_ deliver: @escaping @Sendable (BLEPairingEvent) -> Void) async -> PortRegistration

    /// Pairs with `address` (bonding), asking the pairing agent what the device wants to be
    /// asked; fails after `timeout` seconds (optional: the default fails `operationNotSupported`).
    func pair(_ address: BluetoothAddress, timeout: Double) async throws(BLEPortError)

    /// Makes the central forget `address`: its bond, keys and cache (optional: the default fails
    /// `operationNotSupported`).
    func unpair(_ address: BluetoothAddress) async throws(BLEPortError)
}

extension BLEPort {
    public func scan(services: [BluetoothUUID], raw: Bool, _ deliver: @escaping @Sendable (BLEDiscovery) -> Void)
        async throws(BLEPortError)
        -> PortRegistration
    {
        try await scan(services: services, deliver)
    }

    public func restoredDevices() async -> [BLEDiscovery] { [] }
    public func loadConnectionParameters(_ parameters: ConnectionParameters, for address: BluetoothAddress)
        async throws(BLEPortError)
    {
        throw BLEPortError(.operationNotSupported, "this port cannot set connection parameters")
    }

    public func keepRestored(
        devices: Set<BluetoothAddress>, _ wanted: @escaping @Sendable (BluetoothAddress, BLECharacteristic) -> Bool
    ) async {}

    public func preferAdapter(_ adapter: String, floorDBm: Int, for address: BluetoothAddress) {}

    public func keepStateForRestart() async {}

    public func attMTU(_ address: BluetoothAddress) async -> Int? { nil }

    public func pairingAgent(_ deliver: @escaping @Sendable (BLEPairingEvent) -> Void) async -> PortRegistration {
        .none
    }

    public func pair(_ address: BluetoothAddress, timeout: Double) async throws(BLEPortError) {
        throw BLEPortError(.operationNotSupported, "this central does not pair")
    }

    public func unpair(_ address: BluetoothAddress) async throws(BLEPortError) {
        throw BLEPortError(.operationNotSupported, "this central does not pair")
    }

    /// The most recent round-trip time of a call to bluetoothd in seconds (e.g. a moving
    /// average of D-Bus method calls), for `bridge/health`; nil when unknown. Must not block:
    /// return a value the port already measured. The default is nil.
    public func lastRoundTripLatency() -> Double? { nil }
}

/// Something a port delivers until it is cancelled: a scan, a notification subscription, a
/// subscription to an MQTT topic filter, connection events.
public struct PortRegistration: Sendable {
    private let end: @Sendable () -> Void

    /// - Parameter cancel: stops the deliveries; called at most once by the gateway, on its loop
    ///   thread; must not block.
    public init(cancel: @escaping @Sendable () -> Void) {
        end = cancel
    }

    /// A registration with nothing to stop.
    public static let none = PortRegistration {}

    /// Stops the deliveries (what is already on its way to the gateway may still arrive).
    public func cancel() { end() }
}
