import Bluetooth

/// What the gateway needs from a Bluetooth LE central (design.md §3), in the shape the BlueZ
/// `CentralManager` offers it: continuous scanning, connections by address, GATT discovery,
/// reads, writes and notification streams.
///
/// Contract for an implementation:
/// - ``scan(services:)`` scans continuously (never stop/start cycles) until the returned stream
///   is dropped or the task iterating it is cancelled. The service filter is a hint: the gateway
///   filters again, because BlueZ merges the filters of every client on the adapter.
/// - ``connect(_:timeout:)`` returns once the link is up and services are resolved; it throws
///   ``BLEPortError`` (kind `connectionTimeout` after `timeout`). The gateway decides when to
///   retry (``ReconnectStrategy``); the port does not reconnect on its own.
/// - Every link that drops after a successful connect — and every link the gateway ends with
///   ``disconnect(_:)`` — is reported once on ``connectionEvents()``.
/// - ``notifications(_:characteristic:)`` enables notifications (or indications) and returns
///   their values in order; the stream finishes when the link drops.
/// - All methods may be called concurrently for different devices; for one device the gateway
///   serialises GATT operations itself.
public protocol BLEPort: Sendable {
    /// Starts (or joins) continuous discovery with a service filter (empty: every device).
    func scan(services: [BluetoothUUID]) async throws(BLEPortError) -> AsyncStream<BLEDiscovery>

    /// Connects to `address` and resolves its services, failing after `timeout` seconds.
    func connect(_ address: BluetoothAddress, timeout: Double) async throws(BLEPortError)

    /// Ends the link to `address` (no-op when not connected).
    func disconnect(_ address: BluetoothAddress) async

    /// The characteristics of a connected device, optionally only under `services`.
    func discover(_ address: BluetoothAddress, services: [BluetoothUUID]?) async throws(BLEPortError) -> [BLECharacteristic]

    /// Enables notifications of `characteristic` and returns the values as they arrive.
    func notifications(_ address: BluetoothAddress, characteristic: BLECharacteristic) async throws(BLEPortError)
        -> AsyncStream<[UInt8]>

    /// Reads the value of `characteristic`.
    func read(_ address: BluetoothAddress, characteristic: BLECharacteristic) async throws(BLEPortError) -> [UInt8]

    /// Writes `value` to `characteristic`, as a Write Request (`withResponse`) or a Write Command.
    func write(_ address: BluetoothAddress, characteristic: BLECharacteristic, value: [UInt8], withResponse: Bool)
        async throws(BLEPortError)

    /// Links that dropped or were closed, one event each; a single long-lived stream.
    func connectionEvents() -> AsyncStream<BLEConnectionEvent>

    /// Seconds of a recent round trip to bluetoothd, for `bridge/health` (optional: the
    /// default implementation returns nil).
    func lastRoundTripLatency() -> Double?
}

extension BLEPort {
    /// The most recent round-trip time of a call to bluetoothd in seconds (e.g. a moving
    /// average of D-Bus method calls), for `bridge/health`; nil when unknown. Must not block:
    /// return a value the port already measured. The default is nil.
    public func lastRoundTripLatency() -> Double? { nil }
}
