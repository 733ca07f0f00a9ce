import Bluetooth
import Gateway
import Synchronization

/// A BLE port backed by a table of fake peripherals; records every operation in order.
public final class InMemoryBLE: BLEPort {
    public struct Peripheral: Sendable {
        public var characteristics: [BLECharacteristic]
        public var values: [BluetoothUUID: [UInt8]] = [:]
        /// Connecting fails with this error.
        public var connectError: BLEPortError?
        /// Writes never complete (until cancelled).
        public var hangWrites = false
        /// Connecting waits while this is set (``update(_:_:)`` clears it), so a test can act
        /// while a connection attempt is in flight.
        public var holdConnect = false

        public init(characteristics: [BLECharacteristic], values: [BluetoothUUID: [UInt8]] = [:],
                    connectError: BLEPortError? = nil, hangWrites: Bool = false, holdConnect: Bool = false) {
            self.characteristics = characteristics
            self.values = values
            self.connectError = connectError
            self.hangWrites = hangWrites
            self.holdConnect = holdConnect
        }
    }

    private struct State {
        var peripherals: [BluetoothAddress: Peripheral] = [:]
        var connected: Set<BluetoothAddress> = []
        var scanFilters: [[BluetoothUUID]] = []
        var discoveries: AsyncStream<BLEDiscovery>.Continuation?
        var events: [AsyncStream<BLEConnectionEvent>.Continuation] = []
        var notifications: [(address: BluetoothAddress, uuid: BluetoothUUID, continuation: AsyncStream<[UInt8]>.Continuation)] = []
        var log: [String] = []
        var connectAttempts: [BluetoothAddress] = []
    }

    private let state = Mutex(State())

    public init() {}

    public func add(_ address: BluetoothAddress, _ peripheral: Peripheral) {
        state.withLock { $0.peripherals[address] = peripheral }
    }

    public func update(_ address: BluetoothAddress, _ change: @Sendable (inout Peripheral) -> Void) {
        state.withLock { state in
            if var peripheral = state.peripherals[address] {
                change(&peripheral)
                state.peripherals[address] = peripheral
            }
        }
    }

    public var log: [String] { state.withLock { $0.log } }
    public var writes: [String] { log.filter { $0.hasPrefix("write") } }
    public var scanFilters: [[BluetoothUUID]] { state.withLock { $0.scanFilters } }
    public var connectAttempts: [BluetoothAddress] { state.withLock { $0.connectAttempts } }
    public func isConnected(_ address: BluetoothAddress) -> Bool { state.withLock { $0.connected.contains(address) } }

    public func scan(services: [BluetoothUUID]) async throws(BLEPortError) -> AsyncStream<BLEDiscovery> {
        let (stream, continuation) = AsyncStream.makeStream(of: BLEDiscovery.self)
        state.withLock {
            $0.scanFilters.append(services)
            $0.discoveries = continuation
        }
        return stream
    }

    /// Reports an advertisement (no filtering here: BlueZ merges the filters of all clients).
    public func advertise(_ discovery: BLEDiscovery) {
        _ = state.withLock { $0.discoveries }?.yield(discovery)
    }

    public func connect(_ address: BluetoothAddress, timeout: Double) async throws(BLEPortError) {
        state.withLock { state in
            state.connectAttempts.append(address)
            state.log.append("connect \(address)")
        }
        while state.withLock({ $0.peripherals[address]?.holdConnect == true }) {
            try? await Task.sleep(for: .milliseconds(1))
        }
        let result: BLEPortError? = state.withLock { state in
            guard let peripheral = state.peripherals[address] else { return BLEPortError(.connectionTimeout, "no such device") }
            if let error = peripheral.connectError { return error }
            state.connected.insert(address)
            return nil
        }
        if let result { throw result }
    }

    public func disconnect(_ address: BluetoothAddress) async {
        let events: [AsyncStream<BLEConnectionEvent>.Continuation]? = state.withLock { state in
            guard state.connected.remove(address) != nil else { return nil }
            state.log.append("disconnect \(address)")
            return state.events
        }
        finishNotifications(address)
        for continuation in events ?? [] { continuation.yield(.disconnected(address, reason: nil)) }
    }

    /// The device drops the link.
    public func dropLink(_ address: BluetoothAddress) {
        let events = state.withLock { state in
            state.connected.remove(address)
            return state.events
        }
        finishNotifications(address)
        for continuation in events { continuation.yield(.disconnected(address, reason: BLEPortError(.peripheralDisconnected, "link lost"))) }
    }

    private func finishNotifications(_ address: BluetoothAddress) {
        let ended = state.withLock { state in
            let ended = state.notifications.filter { $0.address == address }
            state.notifications.removeAll { $0.address == address }
            return ended
        }
        for entry in ended { entry.continuation.finish() }
    }

    public func discover(_ address: BluetoothAddress, services: [BluetoothUUID]?) async throws(BLEPortError) -> [BLECharacteristic] {
        try state.withLock { state throws(BLEPortError) in
            guard state.connected.contains(address), let peripheral = state.peripherals[address] else {
                throw BLEPortError(.notConnected, "not connected")
            }
            return peripheral.characteristics
        }
    }

    public func notifications(_ address: BluetoothAddress, characteristic: BLECharacteristic) async throws(BLEPortError) -> AsyncStream<[UInt8]> {
        let (stream, continuation) = AsyncStream.makeStream(of: [UInt8].self)
        state.withLock {
            $0.notifications.append((address, characteristic.uuid, continuation))
            $0.log.append("notify \(address) \(characteristic.uuid.shortDescription)")
        }
        return stream
    }

    /// The device notifies a value.
    public func notify(_ address: BluetoothAddress, _ uuid: BluetoothUUID, _ value: [UInt8]) {
        let targets = state.withLock { $0.notifications.filter { $0.address == address && $0.uuid == uuid } }
        for target in targets { target.continuation.yield(value) }
    }

    public var notificationCount: Int { state.withLock { $0.notifications.count } }

    public func read(_ address: BluetoothAddress, characteristic: BLECharacteristic) async throws(BLEPortError) -> [UInt8] {
        try state.withLock { state throws(BLEPortError) in
            guard state.connected.contains(address) else { throw BLEPortError(.notConnected, "not connected") }
            state.log.append("read \(address) \(characteristic.uuid.shortDescription)")
            return state.peripherals[address]?.values[characteristic.uuid] ?? []
        }
    }

    public func write(_ address: BluetoothAddress, characteristic: BLECharacteristic, value: [UInt8], withResponse: Bool)
        async throws(BLEPortError)
    {
        let hang: Bool = try state.withLock { state throws(BLEPortError) in
            guard state.connected.contains(address) else { throw BLEPortError(.notConnected, "not connected") }
            state.log.append("write-begin \(address) \(characteristic.uuid.shortDescription) \(value.map { String($0) }.joined(separator: ","))")
            return state.peripherals[address]?.hangWrites ?? false
        }
        if hang {
            while !Task.isCancelled { await Task.yield() }
            throw BLEPortError(.other, "cancelled")
        }
        // Take a few scheduling turns, so writes that were not serialised would interleave.
        for _ in 0..<20 { await Task.yield() }
        state.withLock {
            $0.log.append("write-end \(address) \(characteristic.uuid.shortDescription) \(withResponse ? "request" : "command")")
        }
    }

    public func connectionEvents() -> AsyncStream<BLEConnectionEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: BLEConnectionEvent.self)
        state.withLock { $0.events.append(continuation) }
        return stream
    }
}
