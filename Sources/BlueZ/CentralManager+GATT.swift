import Bluetooth
import DBus
import EventLoop
import FIFOQueue

extension CentralManager {
    /// The peripheral's services, once BlueZ has resolved them (`ServicesResolved`), optionally
    /// only those with one of `uuids`.
    ///
    /// Waits for `ServicesResolved=true`, failing with ``CentralError/Code/peripheralDisconnected``
    /// when the link drops (or the device is removed) first. BlueZ keeps GATT objects across
    /// reconnections and may export them before they are resolved; only resolved ones are used.
    /// BlueZ hides the GAP (0x1800) and HID (0x1812) services. Waits at most `timeout`
    /// (default: ``CentralOptions/resolveTimeout``), then fails with
    /// ``CentralError/Code/connectionTimeout``.
    public func discoverServices(
        _ uuids: [BluetoothUUID]? = nil, for peripheral: Peripheral, timeout: Duration? = nil
    ) async throws -> [Service] {
        let address = peripheral.address
        let operation = "discover services of \(address)"
        try requirePoweredOn(operation)
        let devicePath: DBusObjectPath = try await waitUntil(
            timeout: timeout ?? options.resolveTimeout, operation: operation, timeoutCode: .connectionTimeout
        ) { central in
            guard let path = central.devicePath(address), let device = central.tree.device(path) else {
                return .failure(
                    CentralError(.unknownDevice, operation: operation, message: "BlueZ does not know \(address)"))
            }
            guard device.isConnected else {
                return .failure(
                    CentralError(.notConnected, operation: operation, message: "\(address) is not connected"))
            }
            return device.servicesResolved ? .success(path) : nil
        }
        return tree.paths(with: BlueZObjectTree.service, below: devicePath).compactMap { path in
            guard path.parent == devicePath, let props = tree.properties(path, BlueZObjectTree.service),
                let uuid = props["UUID"]?.string.flatMap(BluetoothUUID.init)
            else { return nil }
            if let uuids, !uuids.contains(uuid) { return nil }
            return Service(
                peripheral: address, uuid: uuid, isPrimary: props["Primary"]?.bool ?? true,
                pathComponent: String(path.rawValue.split(separator: "/").last ?? ""))
        }
    }

    /// The characteristics of a service (from BlueZ's resolved objects), optionally only those
    /// with one of `uuids`.
    /// - Throws: ``CentralError/Code/unknownDevice`` when the service is no longer exported.
    public func discoverCharacteristics(_ uuids: [BluetoothUUID]? = nil, for service: Service) throws
        -> [Characteristic]
    {
        guard let devicePath = devicePath(service.peripheral),
            let servicePath = try? devicePath.appending(service.pathComponent),
            tree.properties(servicePath, BlueZObjectTree.service) != nil
        else {
            throw CentralError(
                .unknownDevice, operation: "discover characteristics", message: "\(service) is not exported by BlueZ")
        }
        return tree.paths(with: BlueZObjectTree.characteristic, below: servicePath).compactMap { path in
            guard path.parent == servicePath,
                let characteristic = characteristic(at: path, devicePath: devicePath, service: service)
            else { return nil }
            if let uuids, !uuids.contains(characteristic.uuid) { return nil }
            return characteristic
        }
    }

    /// The descriptors of a characteristic (BlueZ exports the CCCD 0x2902 too; do not write it —
    /// use ``notifications(for:)``).
    public func discoverDescriptors(for characteristic: Characteristic) throws -> [Descriptor] {
        let (charPath, resolved) = try resolve(characteristic, operation: "discover descriptors")
        guard let devicePath = devicePath(characteristic.peripheral) else { return [] }
        return tree.paths(with: BlueZObjectTree.descriptor, below: charPath).compactMap { path in
            guard
                let uuid = tree.properties(path, BlueZObjectTree.descriptor)?["UUID"]?.string.flatMap(
                    BluetoothUUID.init)
            else { return nil }
            return Descriptor(
                characteristic: resolved, uuid: uuid,
                relativePath: String(path.rawValue.dropFirst(devicePath.rawValue.count + 1)))
        }
    }

    func characteristic(at path: DBusObjectPath, devicePath: DBusObjectPath, service: Service? = nil) -> Characteristic?
    {
        guard let props = tree.properties(path, BlueZObjectTree.characteristic),
            let uuid = props["UUID"]?.string.flatMap(BluetoothUUID.init),
            let address = address(ofDevicePath: devicePath)
        else { return nil }
        let serviceUUID: BluetoothUUID
        if let service {
            serviceUUID = service.uuid
        } else if let parent = path.parent,
            let uuid = tree.properties(parent, BlueZObjectTree.service)?["UUID"]?.string.flatMap(BluetoothUUID.init)
        {
            serviceUUID = uuid
        } else {
            return nil
        }
        return Characteristic(
            peripheral: address, service: serviceUUID, uuid: uuid,
            properties: CharacteristicProperties(bluezFlags: props["Flags"]?.strings ?? []),
            relativePath: String(path.rawValue.dropFirst(devicePath.rawValue.count + 1)))
    }

    /// Finds the characteristic's object: by its path when it was discovered, else by UUIDs.
    func resolve(_ characteristic: Characteristic, operation: String) throws -> (DBusObjectPath, Characteristic) {
        guard let devicePath = devicePath(characteristic.peripheral), tree.device(devicePath) != nil else {
            throw CentralError(
                .unknownDevice, operation: operation, message: "BlueZ does not know \(characteristic.peripheral)")
        }
        if let relative = characteristic.relativePath,
            let path = try? DBusObjectPath(devicePath.rawValue + "/" + relative),
            let found = self.characteristic(at: path, devicePath: devicePath), found.uuid == characteristic.uuid
        {
            return (path, found)
        }
        for path in tree.paths(with: BlueZObjectTree.characteristic, below: devicePath) {
            guard let found = self.characteristic(at: path, devicePath: devicePath),
                found.uuid == characteristic.uuid, found.service == characteristic.service
            else { continue }
            return (path, found)
        }
        throw CentralError(
            .unknownDevice, operation: operation,
            message: "\(characteristic) is not exported by BlueZ (discover services first)")
    }

    func requireConnected(_ address: BluetoothAddress, _ operation: String) throws {
        try requirePoweredOn(operation)
        guard let path = devicePath(address), tree.device(path)?.isConnected == true else {
            throw CentralError(.notConnected, operation: operation, message: "\(address) is not connected")
        }
    }

    /// Reads a characteristic's value (`ReadValue`; BlueZ uses read-blob for long values).
    ///
    /// With `StartNotify` subscriptions the `Value` signal BlueZ emits for this read is not
    /// delivered as a notification (it is held back while the read runs and dropped once); with
    /// `AcquireNotify` reads never appear in the notification stream.
    public func readValue(for characteristic: Characteristic) async throws -> [UInt8] {
        let operation = "read \(characteristic)"
        return try await withDeviceQueue(characteristic.peripheral) {
            try self.requireConnected(characteristic.peripheral, operation)
            let (path, _) = try self.resolve(characteristic, operation: operation)
            self.heldValues[path] = []
            var result: [UInt8]? = nil
            defer { self.releaseHeldValues(path, readResult: result) }
            do {
                let reply = try await self.callBlueZ(
                    path, BlueZObjectTree.characteristic, "ReadValue", [.variantDictionary([String: DBusValue]())])
                guard let bytes = reply.first?.bytes else {
                    throw CentralError(.failed, operation: operation, message: "ReadValue replied without bytes")
                }
                result = bytes
                return bytes
            } catch {
                throw self.gattError(
                    error, characteristic.peripheral, "org.bluez.GattCharacteristic1.ReadValue \(characteristic)")
            }
        }
    }

    /// Writes a characteristic's value (`WriteValue` with `type` `request` or `command`).
    ///
    /// `.withResponse` values longer than MTU − 3 are sent by BlueZ as a long write; more than 512
    /// bytes fail with ``CentralError/Code/invalidValueLength``. `.withoutResponse` values longer
    /// than ``maximumWriteValueLength(for:type:)`` fail with `invalidValueLength` before anything
    /// is sent.
    public func writeValue(_ value: [UInt8], for characteristic: Characteristic, type: WriteType) async throws {
        let operation = "write \(characteristic)"
        try await withDeviceQueue(characteristic.peripheral) {
            try self.requireConnected(characteristic.peripheral, operation)
            let (path, resolved) = try self.resolve(characteristic, operation: operation)
            let limit = self.maximumWriteValueLength(path: path, type: type)
            guard value.count <= limit else {
                throw CentralError(
                    .invalidValueLength, operation: operation,
                    message:
                        "\(value.count) bytes is longer than the \(limit) allowed for a write \(type == .withResponse ? "with" : "without") response"
                )
            }
            let needed: CharacteristicProperties =
                type == .withResponse ? [.write, .reliableWrite] : [.writeWithoutResponse]
            guard !resolved.properties.isDisjoint(with: needed) else {
                throw CentralError(
                    .operationNotSupported, operation: operation,
                    message:
                        "the characteristic's flags (\(resolved.properties)) do not allow a write \(type == .withResponse ? "with" : "without") response"
                )
            }
            let options = DBusValue.variantDictionary([("type", .string(type == .withResponse ? "request" : "command"))]
            )
            do {
                _ = try await self.callBlueZ(
                    path, BlueZObjectTree.characteristic, "WriteValue", [.bytes(value), options])
            } catch {
                throw self.gattError(
                    error, characteristic.peripheral, "org.bluez.GattCharacteristic1.WriteValue \(characteristic)")
            }
        }
    }

    /// Reads a descriptor's value.
    public func readValue(for descriptor: Descriptor) async throws -> [UInt8] {
        let address = descriptor.characteristic.peripheral
        let operation = "read \(descriptor)"
        return try await withDeviceQueue(address) {
            let path = try self.exportedPath(of: descriptor, operation)
            do {
                let reply = try await self.callBlueZ(
                    path, BlueZObjectTree.descriptor, "ReadValue", [.variantDictionary([String: DBusValue]())])
                return reply.first?.bytes ?? []
            } catch {
                throw self.gattError(error, address, "org.bluez.GattDescriptor1.ReadValue \(descriptor)")
            }
        }
    }

    /// The D-Bus object of a descriptor of a connected peripheral, as BlueZ exports it now; the
    /// error the read or write reports when the link or the object is gone.
    private func exportedPath(of descriptor: Descriptor, _ operation: String) throws -> DBusObjectPath {
        let address = descriptor.characteristic.peripheral
        try requireConnected(address, operation)
        guard let devicePath = devicePath(address),
            let path = try? DBusObjectPath(devicePath.rawValue + "/" + descriptor.relativePath),
            tree.properties(path, BlueZObjectTree.descriptor) != nil
        else {
            throw CentralError(.unknownDevice, operation: operation, message: "\(descriptor) is not exported by BlueZ")
        }
        return path
    }

    /// Writes a descriptor's value (`WriteValue`). BlueZ manages the CCCD (0x2902) itself: use
    /// ``notifications(for:)`` rather than writing it.
    public func writeValue(_ value: [UInt8], for descriptor: Descriptor) async throws {
        let address = descriptor.characteristic.peripheral
        let operation = "write \(descriptor)"
        try await withDeviceQueue(address) {
            let path = try self.exportedPath(of: descriptor, operation)
            do {
                _ = try await self.callBlueZ(
                    path, BlueZObjectTree.descriptor, "WriteValue",
                    [.bytes(value), .variantDictionary([String: DBusValue]())])
            } catch {
                throw self.gattError(error, address, "org.bluez.GattDescriptor1.WriteValue \(descriptor)")
            }
        }
    }

    /// The ATT MTU of the link to `address` as BlueZ tells it: the `MTU` property of its
    /// characteristics (bluetoothd 5.62 and later, after the MTU exchange), else the MTU an
    /// `AcquireNotify` of one of its subscriptions returned; nil when neither is known.
    public func attMTU(_ address: BluetoothAddress) -> Int? {
        if let device = devicePath(address) {
            for path in tree.paths(with: BlueZObjectTree.characteristic, below: device) {
                if let mtu = tree.properties(path, BlueZObjectTree.characteristic)?["MTU"]?.int, mtu >= 23 {
                    return mtu
                }
            }
        }
        for (key, subscription) in subscriptions where key.peripheral == address {
            if case .acquired(let socket) = subscription.mode, socket.isOpen { return socket.mtu }
        }
        return nil
    }

    /// The longest value one write of `type` may carry: MTU − 3 without response (the `MTU`
    /// BlueZ reports while connected, 23 when unknown), 512 with response (long write).
    public func maximumWriteValueLength(for characteristic: Characteristic, type: WriteType) -> Int {
        guard let (path, _) = try? resolve(characteristic, operation: "maximumWriteValueLength") else {
            return type == .withResponse ? 512 : 20
        }
        return maximumWriteValueLength(path: path, type: type)
    }

    func maximumWriteValueLength(path: DBusObjectPath, type: WriteType) -> Int {
        guard type == .withoutResponse else { return 512 }
        let mtu = tree.properties(path, BlueZObjectTree.characteristic)?["MTU"]?.int ?? 23
        return max(20, mtu - 3)
    }

    /// Maps a GATT call error; a `Failed` that means the link is gone becomes `notConnected` /
    /// `peripheralDisconnected`.
    func gattError(_ error: any Error, _ address: BluetoothAddress, _ operation: String) -> CentralError {
        var failure = CentralError.wrap(error, operation: operation)
        if failure.code == .failed || failure.code == .bluezUnavailable, let path = devicePath(address),
            tree.device(path)?.isConnected != true, bluezOwner != nil
        {
            failure.code = .peripheralDisconnected
        }
        return failure
    }

    /// Runs `body` when no other GATT operation of this device runs (FIFO).
    func withDeviceQueue<T: Sendable>(_ address: BluetoothAddress, _ body: () async throws -> T) async throws -> T {
        // The device is handed from one operation to the next waiting (it stays busy), so one
        // that arrives meanwhile cannot get in before those waiting: the operations run in the
        // order they came (a bulk transfer's writes without response must reach the device so).
        if busyDevices.contains(address) {
            await withCheckedContinuation { deviceQueues[address, default: []].append($0) }
        } else {
            busyDevices.insert(address)
        }
        defer {
            if let next = deviceQueues[address]?.popFirst() {
                if deviceQueues[address]?.isEmpty == true { deviceQueues[address] = nil }
                next.resume()
            } else {
                busyDevices.remove(address)
            }
        }
        return try await body()
    }
}
