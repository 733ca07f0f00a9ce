import Bluetooth
import DBus

extension PeripheralManager {
    static let serviceInterface = "org.bluez.GattService1"
    static let characteristicInterface = "org.bluez.GattCharacteristic1"
    static let descriptorInterface = "org.bluez.GattDescriptor1"
    static let optionsSignature: DBusSignature = [.dictionary(key: .string, value: .variant)]

    /// The services published now, in the order they were added.
    public var services: [LocalService] { localServices }

    /// Publishes a service (`peripheralManager.add(_:)`): exports it and registers the whole GATT
    /// application again (bluetoothd reads an application once, at registration). Returns when
    /// BlueZ accepted it.
    ///
    /// Subscriptions of services already published end (``PeripheralEvent/unsubscribed(_:)``):
    /// re-registering resets bluetoothd's CCCD state, and centrals subscribe again.
    /// - Throws: ``PeripheralError``: ``PeripheralError/Code/invalidService`` for a tree BlueZ
    ///   would refuse (checked first) or did refuse; the state's error when not `.poweredOn`.
    @discardableResult
    public func add(_ service: MutableService) async throws -> LocalService {
        let operation = "add service \(service.uuid.shortDescription)"
        _ = try registersNow(operation)
        if let problem = service.problem {
            throw PeripheralError(.invalidService, operation: operation, message: problem)
        }
        return try await serialized {
            guard try registersNow(operation) else {
                // Registered with the rest once the adapter is powered on (recover()).
                let local = try export(service)
                localServices.append(local)
                return local
            }
            await unregisterApplication()
            let local = try export(service)
            localServices.append(local)
            do {
                try await registerApplication()
            } catch {
                unexport(local)
                localServices.removeAll { $0 == local }
                if !localServices.isEmpty { try? await registerApplication() }
                throw PeripheralError.wrap(error, operation: operation)
            }
            emit(.servicesRegistered(localServices))
            return local
        }
    }

    /// Removes a published service (`peripheralManager.remove(_:)`) and registers the rest again.
    public func remove(_ service: LocalService) async throws {
        try await removeServices([service])
    }

    /// Removes every published service (`peripheralManager.removeAllServices()`).
    public func removeAllServices() async throws {
        try await removeServices(localServices)
    }

    private func removeServices(_ removed: [LocalService]) async throws {
        let operation = "remove services"
        try await serialized {
            let known = removed.filter(localServices.contains)
            guard !known.isEmpty else { return }
            await unregisterApplication()
            for service in known { unexport(service) }
            localServices.removeAll(where: known.contains)
            guard !localServices.isEmpty, state == .poweredOn else { return }
            do {
                try await registerApplication()
            } catch {
                throw PeripheralError.wrap(error, operation: operation)
            }
            emit(.servicesRegistered(localServices))
        }
    }

    /// Finds a published characteristic by UUID (optionally only in services with `service`).
    public func characteristic(_ uuid: BluetoothUUID, service: BluetoothUUID? = nil) -> LocalCharacteristic? {
        for local in localServices where service == nil || local.uuid == service {
            if let found = local.characteristics.first(where: { $0.uuid == uuid }) { return found }
        }
        return nil
    }

    /// The cached value of a characteristic (nil when its reads go to the app or it is unknown).
    public func value(of characteristic: LocalCharacteristic) -> [UInt8]? {
        characteristicRecords[characteristic.path]?.cachedValue
    }

    /// Whether a central has enabled notifications or indications (bluetoothd's `StartNotify`
    /// without a `StopNotify` since).
    public func isSubscribed(_ characteristic: LocalCharacteristic) -> Bool {
        characteristicRecords[characteristic.path]?.notifying ?? false
    }

    /// Sends a new value to the subscribed centrals (`updateValue(_:for:onSubscribedCentrals:)`).
    ///
    /// The value always becomes the characteristic's current value (served to later reads when
    /// the characteristic has a cached value). It is sent — a notification, or an indication to
    /// centrals that enabled indications; bluetoothd chooses per central — when a central is
    /// subscribed and the application is registered; then the result is true. With nobody
    /// subscribed nothing is queued for later and the result is false (Core Bluetooth returns false
    /// when its queue is full; here there is no queue: the next update simply carries the newest
    /// value). bluetoothd truncates what does not fit the central's MTU − 3.
    ///
    /// - Parameter centrals: must be nil: BlueZ sends to every subscribed central and cannot
    ///   address one.
    /// - Throws: ``PeripheralError`` ``PeripheralError/Code/unknownAttribute`` for a characteristic
    ///   not published (any more), ``PeripheralError/Code/invalidValueLength`` beyond 512 bytes,
    ///   ``PeripheralError/Code/operationNotSupported`` for a list of centrals.
    @discardableResult
    public func updateValue(
        _ value: [UInt8], for characteristic: LocalCharacteristic, onSubscribedCentrals centrals: [Central]? = nil
    ) throws -> Bool {
        let operation = "update \(characteristic)"
        guard var record = characteristicRecords[characteristic.path] else {
            throw PeripheralError(
                .unknownAttribute, operation: operation, message: "the characteristic is not published")
        }
        guard centrals == nil else {
            throw PeripheralError(
                .operationNotSupported, operation: operation,
                message: "BlueZ notifies every subscribed central; it cannot address individual centrals")
        }
        guard value.count <= 512 else {
            throw PeripheralError(
                .invalidValueLength, operation: operation,
                message: "a value holds at most 512 bytes, got \(value.count)")
        }
        if record.cachedValue != nil { record.cachedValue = value }
        characteristicRecords[characteristic.path] = record
        let send =
            record.notifying && applicationRegistered && state == .poweredOn
            && !record.local.properties.isDisjoint(with: [.notify, .indicate])
        try? connection.assumeIsolated { connection in
            try connection.setProperty(
                "Value", to: .bytes(value), interface: Self.characteristicInterface, at: characteristic.path, emit: send
            )
        }
        return send
    }

    // MARK: Exporting

    private func export(_ service: MutableService) throws -> LocalService {
        let index = nextServiceIndex
        nextServiceIndex += 1
        let servicePath = try applicationRoot.appending("service\(index)")
        var characteristics: [LocalCharacteristic] = []
        var interfaces: [(DBusObjectPath, DBusInterface)] = [
            (
                servicePath,
                DBusInterface(
                    Self.serviceInterface,
                    properties: [
                        DBusProperty("UUID", type: .string, value: .string(service.uuid.description)),
                        DBusProperty("Primary", type: .boolean, value: .boolean(service.isPrimary)),
                        DBusProperty("Handle", type: .uint16, access: .readwrite, value: .uint16(0)),
                    ])
            )
        ]
        for (charIndex, characteristic) in service.characteristics.enumerated() {
            let path = try servicePath.appending("char\(charIndex)")
            var descriptors: [LocalDescriptor] = []
            for (descIndex, descriptor) in characteristic.descriptors.enumerated() {
                let descPath = try path.appending("desc\(descIndex)")
                let local = LocalDescriptor(
                    characteristic: characteristic.uuid, uuid: descriptor.uuid, properties: descriptor.properties,
                    path: descPath)
                descriptors.append(local)
                descriptorRecords[descPath] = DescriptorRecord(local: local, value: descriptor.value)
                interfaces.append((descPath, descriptorInterface(descriptor, path: descPath, characteristicPath: path)))
            }
            let local = LocalCharacteristic(
                service: service.uuid, uuid: characteristic.uuid, properties: characteristic.properties,
                permissions: characteristic.permissions, descriptors: descriptors, path: path)
            characteristics.append(local)
            characteristicRecords[path] = CharacteristicRecord(local: local, cachedValue: characteristic.value)
            interfaces.insert(
                (path, characteristicInterface(characteristic, path: path, servicePath: servicePath)),
                at: interfaces.count - descriptors.count)
        }
        try connection.assumeIsolated { connection in
            for (path, interface) in interfaces { try connection.export([interface], at: path) }
        }
        return LocalService(
            uuid: service.uuid, isPrimary: service.isPrimary, characteristics: characteristics, path: servicePath)
    }

    private func unexport(_ service: LocalService) {
        for characteristic in service.characteristics {
            for descriptor in characteristic.descriptors { descriptorRecords.removeValue(forKey: descriptor.path) }
            characteristicRecords.removeValue(forKey: characteristic.path)
        }
        connection.assumeIsolated { connection in
            for path in connection.exportedPaths.reversed()
            where path == service.path || path.isDescendant(of: service.path) {
                try? connection.unexport(at: path)
            }
        }
    }

    /// `ReadValue` and `WriteValue` of a characteristic or descriptor, answered later (deferred).
    private func requestMethods(_ path: DBusObjectPath) -> [DBusMethod] {
        [
            .deferred("ReadValue", in: Self.optionsSignature, out: [.array(.byte)]) { [weak self] call, reply in
                guard let self else { return reply.fail(ATTError.unlikelyError.bluezError) }
                self.onLoop { $0.handleRead(path, call, reply) }
            },
            .deferred("WriteValue", in: [.array(.byte), .dictionary(key: .string, value: .variant)]) {
                [weak self] call, reply in
                guard let self else { return reply.fail(ATTError.unlikelyError.bluezError) }
                self.onLoop { $0.handleWrite(path, call, reply) }
            },
        ]
    }

    private func characteristicInterface(
        _ characteristic: MutableCharacteristic, path: DBusObjectPath, servicePath: DBusObjectPath
    ) -> DBusInterface {
        DBusInterface(
            Self.characteristicInterface,
            methods: requestMethods(path) + [
                .immediate("StartNotify") { [weak self] call in
                    try self?.assumeIsolated { try $0.handleNotify(path, call, start: true) }
                    return []
                },
                .immediate("StopNotify") { [weak self] call in
                    try self?.assumeIsolated { try $0.handleNotify(path, call, start: false) }
                    return []
                },
                .immediate("Confirm") { [weak self] call in
                    self?.onLoop { $0.handleConfirm(path, call) }
                    return []
                },
            ],
            properties: [
                DBusProperty("UUID", type: .string, value: .string(characteristic.uuid.description)),
                DBusProperty("Service", type: .objectPath, value: .objectPath(servicePath)),
                DBusProperty("Flags", type: .array(.string), value: .strings(characteristic.bluezFlags)),
                DBusProperty("Handle", type: .uint16, access: .readwrite, value: .uint16(0)),
                DBusProperty("Value", type: .array(.byte), value: .bytes(characteristic.value ?? [])),
            ])
    }

    private func descriptorInterface(
        _ descriptor: MutableDescriptor, path: DBusObjectPath, characteristicPath: DBusObjectPath
    ) -> DBusInterface {
        DBusInterface(
            Self.descriptorInterface,
            methods: requestMethods(path),
            properties: [
                DBusProperty("UUID", type: .string, value: .string(descriptor.uuid.description)),
                DBusProperty("Characteristic", type: .objectPath, value: .objectPath(characteristicPath)),
                DBusProperty(
                    "Flags", type: .array(.string),
                    value: .strings(descriptor.permissions.bluezFlags(for: descriptor.properties))),
                DBusProperty("Handle", type: .uint16, access: .readwrite, value: .uint16(0)),
                DBusProperty("Value", type: .array(.byte), value: .bytes(descriptor.value ?? [])),
            ])
    }

    // MARK: Calls from bluetoothd

    /// Only the current owner of `org.bluez` may call into the application.
    private func fromBlueZ(_ call: DBusMessage) -> Bool {
        call.sender != nil && call.sender == bluezOwner
    }

    static let notFromBlueZ = DBusError(
        "org.bluez.Error.NotAuthorized", "only bluetoothd (the owner of org.bluez) may call this")

    /// The longest attribute value ATT allows (Core Specification Vol 3 Part F §3.2.9).
    static let maximumValueLength = 512

    /// Why a request at `offset` with `length` bytes cannot be served, nil when it can: the
    /// options come over the bus, so a negative or huge offset (which would slice past a value
    /// or pad a write to gigabytes) is refused before the app sees the request.
    static func refusal(offset: Int, length: Int) -> ATTError? {
        guard offset >= 0, offset <= maximumValueLength else { return .invalidOffset }
        guard length <= maximumValueLength - offset else { return .invalidAttributeValueLength }
        return nil
    }

    func handleRead(_ path: DBusObjectPath, _ call: DBusMessage, _ reply: DBusPendingReply) {
        guard fromBlueZ(call) else { return reply.fail(Self.notFromBlueZ) }
        let context = RequestContext(options: call.arguments.first)
        if let refusal = Self.refusal(offset: context.offset, length: 0) { return reply.fail(refusal.bluezError) }
        let attribute: LocalAttribute
        let cached: [UInt8]?
        if let record = characteristicRecords[path] {
            attribute = .characteristic(record.local)
            cached = record.cachedValue
        } else if let record = descriptorRecords[path] {
            attribute = .descriptor(record.local)
            cached = record.value
        } else {
            return reply.fail(ATTError.unlikelyError.bluezError)
        }
        let request = ReadRequest(attribute: attribute, context: context, reply: reply)
        if let cached { return request.respond(withWholeValue: cached) }
        guard !eventContinuations.isEmpty else { return request.fail(.unlikelyError) }
        emit(.read(request))
    }

    func handleWrite(_ path: DBusObjectPath, _ call: DBusMessage, _ reply: DBusPendingReply) {
        guard fromBlueZ(call) else { return reply.fail(Self.notFromBlueZ) }
        let options = call.arguments.count > 1 ? call.arguments[1] : nil
        let context = RequestContext(options: options)
        let value = call.arguments.first?.bytes ?? []
        if let refusal = Self.refusal(offset: context.offset, length: value.count) {
            return reply.fail(refusal.bluezError)
        }
        let attribute: LocalAttribute
        let expectsResponse: Bool
        if let record = characteristicRecords[path] {
            attribute = .characteristic(record.local)
            expectsResponse = Self.expectsResponse(
                type: options?["type"]?.string, properties: record.local.properties,
                noReplyExpected: call.noReplyExpected)
        } else if let record = descriptorRecords[path] {
            attribute = .descriptor(record.local)
            expectsResponse = !call.noReplyExpected
        } else {
            return reply.fail(ATTError.unlikelyError.bluezError)
        }
        let request = WriteRequest(
            attribute: attribute, context: context, value: value, expectsResponse: expectsResponse,
            isPrepareAuthorization: options?["prepare-authorize"]?.bool ?? false, reply: reply)
        if !expectsResponse { request.respond() }
        if eventContinuations.isEmpty {
            if expectsResponse { request.fail(.unlikelyError) }
            return
        }
        emit(.write(request))
    }

    /// Whether bluetoothd waits for the app's answer to a write (docs/bluez.md §5.1): newer
    /// bluetoothd says so in `type`; 5.66 sends no type and acknowledges every write to a
    /// characteristic with `write-without-response` itself.
    static func expectsResponse(type: String?, properties: CharacteristicProperties, noReplyExpected: Bool) -> Bool {
        if noReplyExpected { return false }
        switch type {
        case "request", "reliable": return true
        case "command": return false
        default: return !properties.contains(.writeWithoutResponse)
        }
    }

    func handleNotify(_ path: DBusObjectPath, _ call: DBusMessage, start: Bool) throws {
        guard fromBlueZ(call) else { throw Self.notFromBlueZ }
        guard let record = characteristicRecords[path] else { throw ATTError.unlikelyError.bluezError }
        guard !record.local.properties.isDisjoint(with: [.notify, .indicate]) else {
            throw ATTError.requestNotSupported.bluezError
        }
        if start {
            characteristicRecords[path]?.notifying = true
            emit(.subscribed(record.local))
        } else if record.notifying {
            characteristicRecords[path]?.notifying = false
            emit(.unsubscribed(record.local))
        }
    }

    func handleConfirm(_ path: DBusObjectPath, _ call: DBusMessage) {
        guard fromBlueZ(call), let record = characteristicRecords[path] else { return }
        emit(.indicationConfirmed(record.local))
    }
}
