import BlueZ
import Bluetooth
import Gateway
import Synchronization

/// The gateway's ``PeripheralPort`` over the BlueZ ``PeripheralManager``: the configured services
/// are published with cached values (the manager answers reads itself), writes are accepted and
/// handed to the gateway, and the manager's own recovery (bluetoothd restart, power cycle)
/// re-registers everything — this port only logs it.
///
/// The manager's events come to a handler on the loop thread, inside its handling of
/// bluetoothd's call, and go on to the gateway from there (docs/architecture.md): no stream, no
/// task. The registration ends when the manager closes.
public final class PeripheralBLEPort: PeripheralPort {
    public let manager: PeripheralManager
    public let log: GatewayLogger
    private struct State {
        var characteristics: [PeripheralCharacteristicID: LocalCharacteristic] = [:]
        var ids: [LocalCharacteristic: PeripheralCharacteristicID] = [:]
        var advertising = false
        /// Where events go once the gateway asked (``events(_:)``).
        var deliver: (@Sendable (PeripheralPortEvent) -> Void)?
        /// Events before that (none in practice: the gateway asks before it serves anything),
        /// the newest ``earlyLimit`` kept.
        var early: [PeripheralPortEvent] = []
    }
    private let state = Mutex(State())
    static let earlyLimit = 1024

    public init(manager: PeripheralManager, log: GatewayLogger) async {
        self.manager = manager
        self.log = log
        _ = await manager.events { [weak self] event in self?.handle(event) }
    }

    public func serve(_ services: [PeripheralService]) async throws(BLEPortError) {
        do {
            for (serviceIndex, service) in services.enumerated() {
                let local = try await manager.add(
                    MutableService(
                        uuid: service.uuid,
                        characteristics: service.characteristics.map {
                            MutableCharacteristic(
                                uuid: $0.uuid, properties: $0.properties, value: $0.value,
                                permissions: Self.permissions($0.properties))
                        }))
                state.withLock { state in
                    for (index, characteristic) in local.characteristics.enumerated() {
                        let id = PeripheralCharacteristicID(service: serviceIndex, characteristic: index)
                        state.characteristics[id] = characteristic
                        state.ids[characteristic] = id
                    }
                }
            }
        } catch {
            throw Self.portError(error)
        }
    }

    public func setValue(_ value: [UInt8], for characteristic: PeripheralCharacteristicID) async {
        guard let local = state.withLock({ $0.characteristics[characteristic] }) else { return }
        do {
            try await manager.updateValue(value, for: local)
        } catch {
            log(.warning, "peripheral: \(local): \(error)")
        }
    }

    public func advertise(_ advertisement: PeripheralAdvertisement?) async throws(BLEPortError) {
        let started = state.withLock { $0.advertising }
        do {
            guard let advertisement else {
                if started { await manager.stopAdvertising() }
                state.withLock { $0.advertising = false }
                return
            }
            let data = advertisement.data
            let converted = Advertisement(
                kind: advertisement.connectable ? .connectable : .broadcast, localName: data.localName,
                serviceUUIDs: data.serviceUUIDs, manufacturerData: data.manufacturerData, serviceData: data.serviceData,
                txPower: data.txPower, appearance: advertisement.appearance, solicitUUIDs: advertisement.solicitUUIDs)
            if started {
                try await manager.updateAdvertisement(converted)
            } else {
                try await manager.startAdvertising(converted)
                state.withLock { $0.advertising = true }
            }
        } catch {
            throw Self.portError(error)
        }
    }

    /// Writes and subscriptions come to `deliver` on the loop thread, as the manager hands them
    /// over (it answers each request first). Called by the gateway on the loop thread; what came
    /// before goes first.
    public func events(_ deliver: @escaping @Sendable (PeripheralPortEvent) -> Void) {
        let early = state.withLock { state in
            state.deliver = deliver
            defer { state.early = [] }
            return state.early
        }
        for event in early { deliver(event) }
    }

    private func post(_ event: PeripheralPortEvent) {
        let deliver = state.withLock { state in
            if state.deliver == nil {
                if state.early.count >= Self.earlyLimit { state.early.removeFirst() }
                state.early.append(event)
            }
            return state.deliver
        }
        deliver?(event)
    }

    /// One event of the manager, on the loop thread inside the manager's isolation.
    private func handle(_ event: BlueZ.PeripheralEvent) {
        switch event {
        case .write(let request):
            if request.expectsResponse { request.respond() }
            guard !request.isPrepareAuthorization, case .characteristic(let local) = request.attribute,
                let id = state.withLock({ $0.ids[local] })
            else { return }
            if request.offset != 0 {
                // A long write arrives in pieces; the value is the bytes at their offsets.
                let current = manager.assumeIsolated { $0.value(of: local) } ?? []
                var value = Array(current.prefix(request.offset))
                value += Array(repeating: 0, count: max(0, request.offset - value.count))
                value += request.value
                post(.write(id, value: value, central: request.central?.address))
            } else {
                post(.write(id, value: request.value, central: request.central?.address))
            }
        case .read(let request):
            // Every characteristic is published with a cached value; a descriptor without one
            // gets an empty value.
            if case .characteristic(let local) = request.attribute,
                let value = manager.assumeIsolated({ $0.value(of: local) })
            {
                request.respond(withWholeValue: value)
            } else {
                request.respond(withWholeValue: [])
            }
        case .subscribed(let local):
            if let id = state.withLock({ $0.ids[local] }) { post(.subscribed(id, central: nil)) }
        case .unsubscribed(let local):
            if let id = state.withLock({ $0.ids[local] }) { post(.unsubscribed(id, central: nil)) }
        case .indicationConfirmed:
            break
        case .servicesRegistered(let services):
            log(.info, "peripheral: BlueZ serves \(services.count) service(s)")
        case .advertisingStarted:
            log(.info, "peripheral: advertising")
        case .advertisingStopped(let reason):
            log(.warning, "peripheral: advertising stopped (\(reason)); it is registered again when BlueZ is back")
        case .registrationFailed(let error):
            log(.error, "peripheral: registering again failed: \(error)")
        }
    }

    /// Read and write permissions as the properties imply; the encrypt-* properties are kept
    /// as properties and become BlueZ's encrypt-read/-write flags.
    public static func permissions(_ properties: CharacteristicProperties) -> AttributePermissions {
        var permissions: AttributePermissions = []
        if !properties.isDisjoint(with: [.read, .notify, .indicate]) { permissions.insert(.readable) }
        if !properties.isDisjoint(with: [.write, .writeWithoutResponse]) { permissions.insert(.writeable) }
        if properties.contains(.encryptRead) { permissions.insert(.readEncryptionRequired) }
        if properties.contains(.encryptWrite) { permissions.insert(.writeEncryptionRequired) }
        if properties.contains(.encryptAuthenticatedRead) { permissions.insert(.readAuthenticationRequired) }
        if properties.contains(.encryptAuthenticatedWrite) { permissions.insert(.writeAuthenticationRequired) }
        return permissions
    }

    public static func portError(_ error: any Error) -> BLEPortError {
        guard let error = error as? PeripheralError else { return BLEPortError(.other, "\(error)") }
        let kind: BLEPortError.Kind
        switch error.code {
        case .poweredOff, .bluezUnavailable: kind = .unavailable
        case .unauthorized: kind = .notPermitted
        case .operationNotSupported: kind = .operationNotSupported
        case .invalidValueLength: kind = .invalidValueLength
        case .unknownAttribute: kind = .notFound
        case .advertisementTooLarge, .invalidAdvertisement, .invalidService: kind = .invalidConfiguration
        default: kind = .other
        }
        return BLEPortError(kind, error.description)
    }
}
