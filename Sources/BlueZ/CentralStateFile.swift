import Bluetooth
import JSON
import LocalSystem

#if canImport(Glibc)
    import Glibc
#endif

/// What a ``CentralManager`` saves to survive a restart of the process: the devices it holds
/// links for (`connect`: it reconnects them by itself, auto-reconnect; without, the app that
/// asked for the link decides at the next start), the characteristics it is subscribed to and
/// the restored devices the app still wants.
///
/// Format (JSON, version 1):
/// `{"version":1,"devices":[{"address":"A4:C1:38:00:00:01","name":"Battery","connect":true}],
///   "subscriptions":[{"address":"A4:C1:38:00:00:01","service":"180F","characteristic":"2A19","path":"service000a/char000b"}]}`
///
/// Written atomically (a temporary file in the same directory, `fsync`, `rename`), so a crash
/// leaves either the old or the new file.
package struct CentralStateFile: Equatable {
    package struct Device: Equatable {
        var address: BluetoothAddress
        var name: String?
        var connect: Bool
    }

    package var devices: [Device] = []
    package var subscriptions: [Characteristic] = []

    package static func == (lhs: CentralStateFile, rhs: CentralStateFile) -> Bool {
        lhs.devices == rhs.devices && lhs.subscriptions.map(\.description) == rhs.subscriptions.map(\.description)
            && lhs.subscriptions.map(\.relativePath) == rhs.subscriptions.map(\.relativePath)
    }

    package var json: JSONValue {
        .object([
            (key: "version", value: .number(1)),
            (
                key: "devices",
                value: .array(
                    devices.map { device in
                        var members: [(key: String, value: JSONValue)] = [
                            (key: "address", value: .string(device.address.description))
                        ]
                        if let name = device.name { members.append((key: "name", value: .string(name))) }
                        members.append((key: "connect", value: .bool(device.connect)))
                        return .object(members)
                    })
            ),
            (
                key: "subscriptions",
                value: .array(
                    subscriptions.map { characteristic in
                        var members: [(key: String, value: JSONValue)] = [
                            (key: "address", value: .string(characteristic.peripheral.description)),
                            (key: "service", value: .string(characteristic.service.shortDescription)),
                            (key: "characteristic", value: .string(characteristic.uuid.shortDescription)),
                        ]
                        if let path = characteristic.relativePath {
                            members.append((key: "path", value: .string(path)))
                        }
                        return .object(members)
                    })
            ),
        ])
    }

    /// Parses the file's JSON; every error names its JSON path.
    package init(json bytes: [UInt8]) throws {
        let root = try JSONReader.parse(bytes).object()
        _ = try root.optional("version")?.integer(in: 1...1)
        for entry in try root.optional("devices")?.array() ?? [] {
            let object = try entry.object()
            let addressReader = try object.required("address")
            guard let address = BluetoothAddress(try addressReader.string()) else {
                throw addressReader.fail("not a Bluetooth address")
            }
            let name = try object.optional("name")?.string()
            let connect = try object.optional("connect")?.bool() ?? false
            try object.finish()
            devices.append(Device(address: address, name: name, connect: connect))
        }
        for entry in try root.optional("subscriptions")?.array() ?? [] {
            let object = try entry.object()
            func read<T>(_ key: String, _ parse: (String) -> T?) throws -> T {
                let reader = try object.required(key)
                guard let value = parse(try reader.string()) else { throw reader.fail("cannot be read as \(T.self)") }
                return value
            }
            let address = try read("address", BluetoothAddress.init)
            let service = try read("service", BluetoothUUID.init)
            let uuid = try read("characteristic", BluetoothUUID.init)
            let path = try object.optional("path")?.string()
            try object.finish()
            if let path {
                subscriptions.append(
                    Characteristic(
                        peripheral: address, service: service, uuid: uuid, properties: [], relativePath: path))
            } else {
                subscriptions.append(Characteristic(peripheral: address, service: service, uuid: uuid))
            }
        }
        try root.finish()
    }

    init(devices: [Device], subscriptions: [Characteristic]) {
        self.devices = devices
        self.subscriptions = subscriptions
    }

    /// Reads the file; nil when it does not exist.
    static func load(path: String) throws -> CentralStateFile? {
        let bytes: [UInt8]
        do {
            bytes = try LocalFile.contents(path)
        } catch {
            if error.code == ENOENT { return nil }
            throw CentralError(.failed, operation: "read the state file \(path)", message: error.description)
        }
        do {
            return try CentralStateFile(json: bytes)
        } catch {
            throw CentralError(.failed, operation: "read the state file \(path)", message: "\(error)")
        }
    }

    /// Writes the file atomically (``LocalFile/write(_:to:mode:)``: `path.tmp`, `fsync`, `rename`).
    func save(path: String) throws {
        var bytes: [UInt8] = []
        json.write(into: &bytes)
        bytes.append(UInt8(ascii: "\n"))
        do {
            try LocalFile.write(bytes, to: path)
        } catch {
            throw CentralError(.failed, operation: "write the state file \(path)", message: error.description)
        }
    }
}

extension CentralManager {
    /// Reads the state file (if configured): wanted connections become links kept up, and
    /// subscriptions wait in ``restoredSubscriptions`` for ``notifications(for:)``.
    func loadStateFile() {
        guard let path = options.stateFilePath else { return }
        guard let file = try? CentralStateFile.load(path: path) else { return }
        for device in file.devices {
            restoredPeripherals.append(Peripheral(address: device.address, name: device.name))
            if device.connect { links[device.address] = Link(configuration: options.reconnect) }
        }
        restoredSubscriptions = file.subscriptions
        lastSavedState = file
    }

    /// Ends the hand-over of the restored state for what the app does not take up (as a Core
    /// Bluetooth app cancels the restored peripherals it does not want): restored subscriptions
    /// `keep` rejects are forgotten, and so are restored peripherals left with no subscription
    /// and no connection kept up, unless `keepPeripheral` wants them (the app will connect them:
    /// they stay in the state file meanwhile, so a crash before their connection restores them
    /// again). The state file is rewritten without what was forgotten, so it is not restored again.
    public func keepRestored(
        peripherals keepPeripheral: (@Sendable (BluetoothAddress) -> Bool)? = nil,
        where keep: @Sendable (Characteristic) -> Bool
    ) {
        restoredSubscriptions.removeAll { !keep($0) }
        if let keepPeripheral {
            heldRestoredPeripherals = Set(restoredPeripherals.map(\.address).filter(keepPeripheral))
        }
        forgetUnusedRestoredPeripherals()
        saveState()
    }

    /// Writes the state file for the next start of the process as this stop leaves it, then
    /// leaves it alone until ``close()`` (which does not rewrite it): the links that are up now
    /// (and those kept up with auto-reconnect) with their subscriptions, so that the disconnects
    /// of a clean stop do not empty it. What was restored at the start and never taken up is
    /// left out. Call it before ending the links; nothing is written without a state file.
    public func keepStateForRestart() {
        guard !closed, !stateFrozen else { return }
        restoredSubscriptions.removeAll()
        heldRestoredPeripherals.removeAll()
        forgetUnusedRestoredPeripherals()
        let kept = links.keys.sorted().filter { links[$0]?.connected == true || links[$0]?.autoReconnect == true }
        let subscribed = subscriptions.keys.sorted { $0.description < $1.description }.filter {
            kept.contains($0.peripheral)
        }
        writeState(stateFile(addresses: kept, subscriptions: subscribed))
        stateFrozen = true
    }

    /// Restored peripherals with neither a subscription (restored or taken up) nor a link this
    /// manager keeps up, and which the app did not keep (``keepRestored(peripherals:where:)``),
    /// are forgotten.
    func forgetUnusedRestoredPeripherals() {
        restoredPeripherals.removeAll { peripheral in
            links[peripheral.address] == nil && !restoredSubscriptions.contains { $0.peripheral == peripheral.address }
                && !subscriptions.keys.contains { $0.peripheral == peripheral.address }
                && !heldRestoredPeripherals.contains(peripheral.address)
        }
    }

    /// Writes the state file (if configured) when something changed: every device this manager
    /// holds a link for (asked for with or without auto-reconnect, adopted, restored), those
    /// with a subscription, and the restored peripherals the app keeps. Errors are not fatal:
    /// the in-memory state stays authoritative and the next change tries again. Nothing is
    /// written after ``keepStateForRestart()``.
    func saveState() {
        guard !stateFrozen else { return }
        var addresses = links.keys.sorted()
        let subscribed = subscriptions.keys.sorted { $0.description < $1.description } + restoredSubscriptions
        for address in subscribed.map(\.peripheral) + heldRestoredPeripherals.sorted()
        where !addresses.contains(address) {
            addresses.append(address)
        }
        writeState(stateFile(addresses: addresses, subscriptions: subscribed))
    }

    /// The state file naming `addresses` (with `connect` for those this manager reconnects by
    /// itself) and `subscriptions`.
    private func stateFile(addresses: [BluetoothAddress], subscriptions: [Characteristic]) -> CentralStateFile {
        let devices = addresses.map { address in
            CentralStateFile.Device(
                address: address,
                name: peripheral(address).name ?? restoredPeripherals.first { $0.address == address }?.name,
                connect: links[address]?.autoReconnect == true)
        }
        return CentralStateFile(devices: devices, subscriptions: subscriptions)
    }

    private func writeState(_ file: CentralStateFile) {
        guard let path = options.stateFilePath, !closed else { return }
        guard file != lastSavedState else { return }
        do {
            try file.save(path: path)
            lastSavedState = file
            if stateFileError != nil {
                stateFileError = nil
                options.stateFileProblem?(nil)
            }
        } catch {
            let failure =
                error as? CentralError
                ?? CentralError(.failed, operation: "write the state file \(path)", message: "\(error)")
            if stateFileError == nil { options.stateFileProblem?(failure) }
            stateFileError = failure
        }
    }
}
