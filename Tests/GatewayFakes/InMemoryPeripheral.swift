import Bluetooth
import Gateway
import Synchronization

/// A peripheral port that records what the gateway serves, sets and advertises, and lets tests
/// play a central's writes and subscriptions.
public final class InMemoryPeripheral: PeripheralPort {
    private struct State {
        var services: [PeripheralService]?
        var values: [PeripheralCharacteristicID: [UInt8]] = [:]
        /// Every ``setValue(_:for:)`` in order (what subscribed centrals would be notified of).
        var notified: [(PeripheralCharacteristicID, [UInt8])] = []
        var advertisements: [PeripheralAdvertisement?] = []
        var events: (@Sendable (PeripheralPortEvent) -> Void)?
        var serveError: BLEPortError?
        var advertiseError: BLEPortError?
        /// The next ``setValue(_:for:)`` waits until ``releaseSetValue()`` (a slow D-Bus call).
        var holdNextSetValue = false
        var holding: Gate?
    }

    private let state = Mutex(State())

    public init() {}

    public var services: [PeripheralService]? { state.withLock { $0.services } }
    public var notified: [(PeripheralCharacteristicID, [UInt8])] { state.withLock { $0.notified } }
    public var advertisements: [PeripheralAdvertisement?] { state.withLock { $0.advertisements } }
    public func value(_ id: PeripheralCharacteristicID) -> [UInt8]? { state.withLock { $0.values[id] } }

    /// Makes ``serve(_:)`` or ``advertise(_:)`` fail from now on (nil: succeed).
    public func failServe(_ error: BLEPortError?) { state.withLock { $0.serveError = error } }
    public func failAdvertise(_ error: BLEPortError?) { state.withLock { $0.advertiseError = error } }

    public func serve(_ services: [PeripheralService]) async throws(BLEPortError) {
        let error = state.withLock { state -> BLEPortError? in
            if let error = state.serveError { return error }
            state.services = services
            for (serviceIndex, service) in services.enumerated() {
                for (index, characteristic) in service.characteristics.enumerated() {
                    state.values[PeripheralCharacteristicID(service: serviceIndex, characteristic: index)] =
                        characteristic.value
                }
            }
            return nil
        }
        if let error { throw error }
    }

    /// Makes the next ``setValue(_:for:)`` wait for ``releaseSetValue()``.
    public func holdNextSetValue() { state.withLock { $0.holdNextSetValue = true } }
    public var isHoldingSetValue: Bool { state.withLock { $0.holding?.waiting ?? 0 > 0 } }
    public func releaseSetValue() { state.withLock { $0.holding }?.open() }

    public func setValue(_ value: [UInt8], for characteristic: PeripheralCharacteristicID) async {
        let gate: Gate? = state.withLock { state in
            guard state.holdNextSetValue else { return nil }
            state.holdNextSetValue = false
            let gate = Gate(open: false)
            state.holding = gate
            return gate
        }
        await gate?.wait()
        state.withLock {
            $0.values[characteristic] = value
            $0.notified.append((characteristic, value))
        }
    }

    public func advertise(_ advertisement: PeripheralAdvertisement?) async throws(BLEPortError) {
        let error = state.withLock { state -> BLEPortError? in
            if let error = state.advertiseError { return error }
            state.advertisements.append(advertisement)
            return nil
        }
        if let error { throw error }
    }

    public func events(_ deliver: @escaping @Sendable (PeripheralPortEvent) -> Void) {
        state.withLock { $0.events = deliver }
    }

    /// A central does something.
    public func send(_ event: PeripheralPortEvent) { state.withLock { $0.events }?(event) }
}
