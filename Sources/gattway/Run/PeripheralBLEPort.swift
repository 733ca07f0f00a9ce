import BlueZ
import Bluetooth
import Gateway
import Synchronization

/// The gateway's ``PeripheralPort`` over the BlueZ ``PeripheralManager``: the configured services
/// are published with cached values (the manager answers reads itself), writes are accepted and
/// handed to the gateway, and the manager's own recovery (bluetoothd restart, power cycle)
/// re-registers everything — this port only logs it.
final class PeripheralBLEPort: PeripheralPort {
    let manager: PeripheralManager
    let log: GatewayLogger
    private struct State {
        var characteristics: [PeripheralCharacteristicID: LocalCharacteristic] = [:]
        var ids: [LocalCharacteristic: PeripheralCharacteristicID] = [:]
        var advertising = false
    }
    private let state = Mutex(State())
    /// Where events go once the gateway asked (``events(_:)``); earlier ones wait in the stream.
    private let eventStream: AsyncStream<PeripheralPortEvent>
    private let continuation: AsyncStream<PeripheralPortEvent>.Continuation
    private let relays: Mutex<[Task<Void, Never>]> = Mutex([])

    init(manager: PeripheralManager, log: GatewayLogger) async {
        self.manager = manager
        self.log = log
        (eventStream, continuation) = AsyncStream.makeStream(of: PeripheralPortEvent.self)
        let managerEvents = await manager.events()
        let task = Task { [weak self] in
            for await event in managerEvents { await self?.handle(event) }
        }
        relays.withLock { $0.append(task) }
    }

    deinit {
        relays.withLock { tasks in for task in tasks { task.cancel() } }
        continuation.finish()
    }

    func serve(_ services: [PeripheralService]) async throws(BLEPortError) {
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

    func setValue(_ value: [UInt8], for characteristic: PeripheralCharacteristicID) async {
        guard let local = state.withLock({ $0.characteristics[characteristic] }) else { return }
        do {
            try await manager.updateValue(value, for: local)
        } catch {
            log(.warning, "peripheral: \(local): \(error)")
        }
    }

    func advertise(_ advertisement: PeripheralAdvertisement?) async throws(BLEPortError) {
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

    /// Writes and subscriptions come to `deliver` from a task that relays the manager's events
    /// (the peripheral role is no hot path; the manager answers each request first).
    func events(_ deliver: @escaping @Sendable (PeripheralPortEvent) -> Void) {
        let stream = eventStream
        let task = Task {
            for await event in stream { deliver(event) }
        }
        relays.withLock { $0.append(task) }
    }

    private func handle(_ event: BlueZ.PeripheralEvent) async {
        switch event {
        case .write(let request):
            if request.expectsResponse { request.respond() }
            guard !request.isPrepareAuthorization, case .characteristic(let local) = request.attribute,
                let id = state.withLock({ $0.ids[local] })
            else { return }
            if request.offset != 0 {
                // A long write arrives in pieces; the value is the bytes at their offsets.
                let current = await manager.value(of: local) ?? []
                var value = Array(current.prefix(request.offset))
                value += Array(repeating: 0, count: max(0, request.offset - value.count))
                value += request.value
                continuation.yield(.write(id, value: value, central: request.central?.address))
            } else {
                continuation.yield(.write(id, value: request.value, central: request.central?.address))
            }
        case .read(let request):
            // Every characteristic is published with a cached value; a descriptor without one
            // gets an empty value.
            if case .characteristic(let local) = request.attribute, let value = await manager.value(of: local) {
                request.respond(withWholeValue: value)
            } else {
                request.respond(withWholeValue: [])
            }
        case .subscribed(let local):
            if let id = state.withLock({ $0.ids[local] }) { continuation.yield(.subscribed(id, central: nil)) }
        case .unsubscribed(let local):
            if let id = state.withLock({ $0.ids[local] }) { continuation.yield(.unsubscribed(id, central: nil)) }
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
    static func permissions(_ properties: CharacteristicProperties) -> AttributePermissions {
        var permissions: AttributePermissions = []
        if !properties.isDisjoint(with: [.read, .notify, .indicate]) { permissions.insert(.readable) }
        if !properties.isDisjoint(with: [.write, .writeWithoutResponse]) { permissions.insert(.writeable) }
        if properties.contains(.encryptRead) { permissions.insert(.readEncryptionRequired) }
        if properties.contains(.encryptWrite) { permissions.insert(.writeEncryptionRequired) }
        if properties.contains(.encryptAuthenticatedRead) { permissions.insert(.readAuthenticationRequired) }
        if properties.contains(.encryptAuthenticatedWrite) { permissions.insert(.writeAuthenticationRequired) }
        return permissions
    }

    static func portError(_ error: any Error) -> BLEPortError {
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
