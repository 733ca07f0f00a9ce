import Bluetooth
import Gateway
import Synchronization

/// A BLE port backed by a table of fake peripherals; records every operation in order.
/// Deliveries (advertisements, notifications, link events) are made on the calling thread, so
/// the gateway queues them to its loop; a test settles the loop to see what they did. Nothing
/// here waits on real time: held connects and hanging writes wait on gates.
public final class InMemoryBLE: BLEPort {
    public struct Peripheral: Sendable {
        public var characteristics: [BLECharacteristic]
        public var values: [BluetoothUUID: [UInt8]] = [:]
        /// Connecting fails with this error.
        public var connectError: BLEPortError?
        /// Writes never complete (until cancelled).
        public var hangWrites = false
        /// Connecting waits while this is set (``update(_:_:)`` clearing it lets it go on), so a
        /// test can act while a connection attempt is in flight.
        public var holdConnect = false
        /// Disconnecting never completes (until cancelled; the link then stays up), as with a
        /// bluetoothd that stopped answering.
        public var hangDisconnect = false

        public init(
            characteristics: [BLECharacteristic], values: [BluetoothUUID: [UInt8]] = [:],
            connectError: BLEPortError? = nil, hangWrites: Bool = false, holdConnect: Bool = false,
            hangDisconnect: Bool = false
        ) {
            self.characteristics = characteristics
            self.values = values
            self.connectError = connectError
            self.hangWrites = hangWrites
            self.holdConnect = holdConnect
            self.hangDisconnect = hangDisconnect
        }
    }

    private struct State {
        var peripherals: [BluetoothAddress: Peripheral] = [:]
        var connected: Set<BluetoothAddress> = []
        var scanFilters: [[BluetoothUUID]] = []
        /// The scans running, by id: their service filter and where their reports go.
        var discoveries: [UInt64: (services: [BluetoothUUID], deliver: @Sendable (BLEDiscovery) -> Void)] = [:]
        var events: [UInt64: @Sendable (BLEConnectionEvent) -> Void] = [:]
        var notifications:
            [UInt64: (address: BluetoothAddress, uuid: BluetoothUUID, deliver: @Sendable ([UInt8]) -> Void)] = [:]
        var nextID: UInt64 = 0
        var log: [String] = []
        var connectAttempts: [BluetoothAddress] = []
        var restored: [BLEDiscovery] = []
        var keptRestored: (@Sendable (BluetoothAddress, BLECharacteristic) -> Bool)?
        var keptRestoredDevices: Set<BluetoothAddress>?
        var keptForRestart = 0
        /// Opened whenever ``update(_:_:)`` runs: held connects look again.
        var connectGate = Gate(open: false)
    }

    private let state = Mutex(State())
    /// Writes of peripherals with `hangWrites` (and their disconnects with `hangDisconnect`)
    /// wait here until cancelled.
    private let never = Gate(open: false)

    public init() {}

    public func add(_ address: BluetoothAddress, _ peripheral: Peripheral) {
        state.withLock { $0.peripherals[address] = peripheral }
    }

    public func update(_ address: BluetoothAddress, _ change: @Sendable (inout Peripheral) -> Void) {
        let gate: Gate = state.withLock { state in
            if var peripheral = state.peripherals[address] {
                change(&peripheral)
                state.peripherals[address] = peripheral
            }
            defer { state.connectGate = Gate(open: false) }
            return state.connectGate
        }
        gate.open()
    }

    public var log: [String] { state.withLock { $0.log } }
    public var writes: [String] { log.filter { $0.hasPrefix("write") } }
    public var scanFilters: [[BluetoothUUID]] { state.withLock { $0.scanFilters } }
    public var connectAttempts: [BluetoothAddress] { state.withLock { $0.connectAttempts } }
    public func isConnected(_ address: BluetoothAddress) -> Bool { state.withLock { $0.connected.contains(address) } }

    public func scan(services: [BluetoothUUID], _ deliver: @escaping @Sendable (BLEDiscovery) -> Void)
        async throws(BLEPortError)
        -> PortRegistration
    {
        let id = state.withLock { state in
            state.scanFilters.append(services)
            state.nextID += 1
            state.discoveries[state.nextID] = (services, deliver)
            return state.nextID
        }
        return PortRegistration { [self] in state.withLock { _ = $0.discoveries.removeValue(forKey: id) } }
    }

    /// The scans running now (their service filters, in the order they started).
    public var activeScanFilters: [[BluetoothUUID]] {
        state.withLock { $0.discoveries.sorted { $0.key < $1.key }.map(\.value.services) }
    }

    /// Reports an advertisement to each scan whose service filter it passes (an empty filter
    /// passes everything), as the central checks each scan's own options.
    public func advertise(_ discovery: BLEDiscovery) {
        let sinks = state.withLock { $0.discoveries.sorted { $0.key < $1.key }.map(\.value) }
        for sink in sinks
        where sink.services.isEmpty || sink.services.contains(where: { discovery.advertisement.advertises($0) }) {
            sink.deliver(discovery)
        }
    }

    public func connect(_ address: BluetoothAddress, timeout: Double) async throws(BLEPortError) {
        state.withLock { state in
            state.connectAttempts.append(address)
            state.log.append("connect \(address)")
        }
        while let gate = state.withLock({ $0.peripherals[address]?.holdConnect == true ? $0.connectGate : nil }),
            !Task.isCancelled
        {
            await gate.wait()
        }
        if Task.isCancelled { throw BLEPortError(.other, "cancelled") }
        let result: BLEPortError? = state.withLock { state in
            guard let peripheral = state.peripherals[address] else {
                return BLEPortError(.connectionTimeout, "no such device")
            }
            if let error = peripheral.connectError { return error }
            state.connected.insert(address)
            return nil
        }
        if let result { throw result }
    }

    public func disconnect(_ address: BluetoothAddress) async {
        let hang = state.withLock { state in
            guard state.peripherals[address]?.hangDisconnect == true, state.connected.contains(address) else {
                return false
            }
            state.log.append("disconnect-begin \(address)")
            return true
        }
        if hang {
            await never.wait()
            state.withLock { $0.log.append("disconnect-cancelled \(address)") }
            return
        }
        let events: [@Sendable (BLEConnectionEvent) -> Void]? = state.withLock { state in
            guard state.connected.remove(address) != nil else { return nil }
            state.log.append("disconnect \(address)")
            return Array(state.events.values)
        }
        finishNotifications(address)
        for deliver in events ?? [] { deliver(.disconnected(address, reason: nil)) }
    }

    /// The device drops the link.
    public func dropLink(_ address: BluetoothAddress) {
        let events = state.withLock { state in
            state.connected.remove(address)
            return Array(state.events.values)
        }
        finishNotifications(address)
        for deliver in events {
            deliver(.disconnected(address, reason: BLEPortError(.peripheralDisconnected, "link lost")))
        }
    }

    /// The link went: its notification subscriptions end (as AcquireNotify sockets do).
    private func finishNotifications(_ address: BluetoothAddress) {
        state.withLock { state in state.notifications = state.notifications.filter { $0.value.address != address } }
    }

    public func discover(_ address: BluetoothAddress, services: [BluetoothUUID]?) async throws(BLEPortError)
        -> [BLECharacteristic]
    {
        try state.withLock { state throws(BLEPortError) in
            guard state.connected.contains(address), let peripheral = state.peripherals[address] else {
                throw BLEPortError(.notConnected, "not connected")
            }
            return peripheral.characteristics
        }
    }

    public func notifications(
        _ address: BluetoothAddress, characteristic: BLECharacteristic, _ deliver: @escaping @Sendable ([UInt8]) -> Void
    ) async throws(BLEPortError) -> PortRegistration {
        let id: UInt64 = state.withLock {
            $0.nextID += 1
            $0.notifications[$0.nextID] = (address, characteristic.uuid, deliver)
            $0.log.append("notify \(address) \(characteristic.uuid.shortDescription)")
            return $0.nextID
        }
        return PortRegistration { [self] in _ = state.withLock { $0.notifications.removeValue(forKey: id) } }
    }

    /// The device notifies a value.
    public func notify(_ address: BluetoothAddress, _ uuid: BluetoothUUID, _ value: [UInt8]) {
        let targets = state.withLock { $0.notifications.values.filter { $0.address == address && $0.uuid == uuid } }
        for target in targets { target.deliver(value) }
    }

    public var notificationCount: Int { state.withLock { $0.notifications.count } }

    public func read(_ address: BluetoothAddress, characteristic: BLECharacteristic) async throws(BLEPortError)
        -> [UInt8]
    {
        try state.withLock { state throws(BLEPortError) in
            guard state.connected.contains(address) else { throw BLEPortError(.notConnected, "not connected") }
            state.log.append("read \(address) \(characteristic.uuid.shortDescription)")
            return state.peripherals[address]?.values[characteristic.uuid] ?? []
        }
    }

    public func write(
        _ address: BluetoothAddress, characteristic: BLECharacteristic, value: [UInt8], withResponse: Bool
    )
        async throws(BLEPortError)
    {
        let hang: Bool = try state.withLock { state throws(BLEPortError) in
            guard state.connected.contains(address) else { throw BLEPortError(.notConnected, "not connected") }
            state.log.append(
                "write-begin \(address) \(characteristic.uuid.shortDescription) \(value.map { String($0) }.joined(separator: ","))"
            )
            return state.peripherals[address]?.hangWrites ?? false
        }
        if hang {
            await never.wait()
            throw BLEPortError(.other, "cancelled")
        }
        // Take a few scheduling turns, so writes that were not serialised would interleave.
        for _ in 0..<20 { await Task.yield() }
        state.withLock {
            $0.log.append(
                "write-end \(address) \(characteristic.uuid.shortDescription) \(withResponse ? "request" : "command")")
        }
    }

    /// What ``restoredDevices()`` answers (a previous run's saved state).
    public func setRestored(_ devices: [BLEDiscovery]) { state.withLock { $0.restored = devices } }

    public func restoredDevices() async -> [BLEDiscovery] { state.withLock { $0.restored } }

    public func keepRestored(
        devices: Set<BluetoothAddress>, _ wanted: @escaping @Sendable (BluetoothAddress, BLECharacteristic) -> Bool
    ) async {
        state.withLock {
            $0.keptRestored = wanted
            $0.keptRestoredDevices = devices
        }
    }

    /// The restored devices the gateway's ``keepRestored(devices:_:)`` keeps; nil before it answered.
    public var keptRestoredDevices: Set<BluetoothAddress>? { state.withLock { $0.keptRestoredDevices } }

    public func keepStateForRestart() async { state.withLock { $0.keptForRestart += 1 } }

    /// How many times the gateway asked to keep the state for its next start (its stops).
    public var keptForRestart: Int { state.withLock { $0.keptForRestart } }

    /// Whether the gateway's ``keepRestored(devices:_:)`` keeps a saved subscription; nil before it answered.
    public func keepsRestored(_ address: BluetoothAddress, _ characteristic: BLECharacteristic) -> Bool? {
        state.withLock { $0.keptRestored }.map { $0(address, characteristic) }
    }

    public func connectionEvents(_ deliver: @escaping @Sendable (BLEConnectionEvent) -> Void) async -> PortRegistration
    {
        let id: UInt64 = state.withLock {
            $0.nextID += 1
            $0.events[$0.nextID] = deliver
            return $0.nextID
        }
        return PortRegistration { [self] in _ = state.withLock { $0.events.removeValue(forKey: id) } }
    }

    /// The adapter is powered on again (or bluetoothd is back).
    public func adapterReady() {
        let events = state.withLock { Array($0.events.values) }
        for deliver in events { deliver(.adapterReady) }
    }

    /// A link the gateway did not make comes up (another client connected the device).
    public func linkUp(_ address: BluetoothAddress, advertisement: AdvertisementData = AdvertisementData()) {
        let events = state.withLock { state in
            state.connected.insert(address)
            return Array(state.events.values)
        }
        for deliver in events { deliver(.connected(BLEDiscovery(address: address, advertisement: advertisement))) }
    }
}
