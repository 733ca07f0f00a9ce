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
        var events: AsyncStream<PeripheralPortEvent>.Continuation?
        var serveError: BLEPortError?
        var advertiseError: BLEPortError?
        /// The next ``setValue(_:for:)`` waits until ``releaseSetValue()`` (a slow D-Bus call).
        var holdNextSetValue = false
        var holding = false
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
                    state.values[PeripheralCharacteristicID(service: serviceIndex, characteristic: index)] = characteristic.value
                }
            }
            return nil
        }
        if let error { throw error }
    }

    /// Makes the next ``setValue(_:for:)`` wait for ``releaseSetValue()``.
    public func holdNextSetValue() { state.withLock { $0.holdNextSetValue = true } }
    public var isHoldingSetValue: Bool { state.withLock { $0.holding } }
    public func releaseSetValue() { state.withLock { $0.holding = false } }

    public func setValue(_ value: [UInt8], for characteristic: PeripheralCharacteristicID) async {
        let held = state.withLock { state in
            guard state.holdNextSetValue else { return false }
            state.holdNextSetValue = false
            state.holding = true
            return true
        }
        while held, state.withLock({ $0.holding }) { try? await Task.sleep(for: .milliseconds(1)) }
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

    public func events() -> AsyncStream<PeripheralPortEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: PeripheralPortEvent.self)
        state.withLock { $0.events = continuation }
        return stream
    }

    /// A central does something.
    public func send(_ event: PeripheralPortEvent) { _ = state.withLock { $0.events }?.yield(event) }
}
