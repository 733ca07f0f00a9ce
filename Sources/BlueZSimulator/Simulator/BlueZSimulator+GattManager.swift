import Bluetooth
import DBus
import EventLoop

/// A GATT application registered through `GattManager1.RegisterApplication`.
/// Invariant behind `@unchecked Sendable`: confined to the loop thread, like ``SimulatedAdapter``.
final class RegisteredApplication: @unchecked Sendable {
    let owner: String
    let root: DBusObjectPath
    /// The tree as read at registration (nil while bluetoothd still waits for GetManagedObjects).
    var tree: LocalApplicationTree?

    init(owner: String, root: DBusObjectPath) {
        self.owner = owner
        self.root = root
    }
}

extension BlueZSimulator {
    static let gattManagerInterfaceName = "org.bluez.GattManager1"
    static let objectManagerInterface = "org.freedesktop.DBus.ObjectManager"
    static let propertiesInterface = "org.freedesktop.DBus.Properties"

    // MARK: GattManager1

    func gattManagerInterface(_ adapter: SimulatedAdapter) -> DBusInterface {
        let name = adapter.spec.name
        return DBusInterface(
            Self.gattManagerInterfaceName,
            methods: [
                // Signatures are checked by the handlers, so wrong arguments get bluetoothd's
                // InvalidArguments rather than the export layer's InvalidArgs.
                .deferred("RegisterApplication", in: nil) { call, reply in
                    self.onLoop { $0.registerApplication(name, call, reply) }
                },
                .immediate("UnregisterApplication", in: nil) { call in
                    try self.onLoop { try $0.unregisterApplication(name, call) }
                    return []
                },
            ])
    }

    /// `RegisterApplication(o root, a{sv} options)`: AlreadyExists for the same sender and root;
    /// then (asynchronously, the loop keeps running) `GetManagedObjects` on the caller at `root`,
    /// the tree checked and laid out, `Handle` written back where the app exported 0, and only
    /// then the reply.
    func registerApplication(_ name: String, _ call: DBusMessage, _ reply: DBusPendingReply) {
        guard let adapter = adapter(named: name), let owner = call.sender, call.arguments.count == 2,
            case .objectPath(let root) = call.arguments[0], case .dictionary(.string, _, _) = call.arguments[1]
        else { return reply.fail(BlueZError.invalidArguments) }
        guard !adapter.applications.contains(where: { $0.owner == owner && $0.root == root }) else {
            return reply.fail(BlueZError.alreadyExists)
        }
        let application = RegisteredApplication(owner: owner, root: root)
        adapter.applications.append(application)
        let generation = self.generation
        Task { await self.readApplication(adapter, application, reply, generation: generation) }
    }

    private func readApplication(
        _ adapter: SimulatedAdapter, _ application: RegisteredApplication, _ reply: DBusPendingReply, generation: Int
    ) async {
        var outcome: Result<LocalApplicationTree, LocalApplicationTree.Refusal>
        var watching = false
        do {
            guard let connection else { throw DBusError(.disconnected, "crashed") }
            try await watchOwner(application.owner)
            watching = true
            let values = try await connection.call(
                destination: application.owner, path: application.root, interface: Self.objectManagerInterface,
                method: "GetManagedObjects")
            do {
                outcome = .success(
                    try LocalApplicationTree(managedObjects: values.first ?? .array(.byte, []), root: application.root))
            } catch {
                outcome = .failure(error)
            }
        } catch {
            log?("simulator: GetManagedObjects on \(application.owner) \(application.root) failed: \(error)")
            outcome = .failure(.noObject)
        }
        guard generation == self.generation, adapter.applications.contains(where: { $0 === application }) else {
            if watching && generation == self.generation { unwatchOwner(application.owner) }
            return reply.fail(BlueZError.failed("Failed to register application"))
        }
        switch outcome {
        case .failure(let refusal):
            log?("simulator: application \(application.root) of \(application.owner) refused: \(refusal)")
            adapter.applications.removeAll { $0 === application }
            if watching { unwatchOwner(application.owner) }
            reply.fail(refusal.error)
        case .success(var tree):
            tree.layOut(from: &adapter.nextHandle)
            application.tree = tree
            withBus { connection in
                for writeBack in tree.handleWriteBacks {
                    try connection.send(
                        destination: application.owner, path: writeBack.path, interface: Self.propertiesInterface,
                        method: "Set",
                        arguments: [
                            .string(writeBack.interface), .string("Handle"), .variant(.uint16(writeBack.handle)),
                        ])
                }
            }
            log?("simulator: \(adapter.spec.name) registered application \(application.root) of \(application.owner)")
            reply.succeed()
            peripheralChanged(adapter)
        }
    }

    /// `UnregisterApplication(o root)`: only the caller's own; DoesNotExist otherwise.
    func unregisterApplication(_ name: String, _ call: DBusMessage) throws {
        guard let adapter = adapter(named: name), let owner = call.sender, call.arguments.count == 1,
            case .objectPath(let root) = call.arguments[0]
        else { throw BlueZError.invalidArguments }
        guard let application = adapter.applications.first(where: { $0.owner == owner && $0.root == root }) else {
            throw BlueZError.doesNotExist
        }
        dropApplication(application, from: adapter)
    }

    /// Removes an application from the local database (linked centrals see its services go).
    func dropApplication(_ application: RegisteredApplication, from adapter: SimulatedAdapter) {
        adapter.applications.removeAll { $0 === application }
        cccdSubscribers = cccdSubscribers.filter { key, _ in
            !(key.owner == application.owner && key.path.isDescendant(of: application.root))
        }
        unwatchOwner(application.owner)
        log?("simulator: \(adapter.spec.name) unregistered application \(application.root) of \(application.owner)")
        peripheralChanged(adapter)
    }

    // MARK: Watching applications

    /// Subscribes (once per unique name) to the signals of an application's connection:
    /// `PropertiesChanged` of characteristics and advertisements, `InterfacesRemoved`.
    func watchOwner(_ owner: String) async throws {
        if ownerWatches[owner] != nil {
            ownerWatches[owner]?.users += 1
            return
        }
        guard let connection else { throw DBusError(.disconnected, "crashed") }
        let stream = try await connection.signals(matching: DBusMatchRule(sender: owner))
        if ownerWatches[owner] != nil {  // another registration subscribed meanwhile
            ownerWatches[owner]?.users += 1
            return
        }
        let generation = self.generation
        // Isolated to the simulator (it captures self; the task ends when cancelled by
        // unwatchOwner/tearDown or when the connection closes), so signals are handled on the
        // loop in the order they arrived relative to the replies of our calls into the app.
        let task = Task {
            for await message in stream {
                self.applicationSignal(message, from: owner, generation: generation)
            }
        }
        ownerWatches[owner] = (task, 1)
    }

    func unwatchOwner(_ owner: String) {
        guard var watch = ownerWatches[owner] else { return }
        watch.users -= 1
        if watch.users > 0 {
            ownerWatches[owner] = watch
        } else {
            watch.task.cancel()
            ownerWatches.removeValue(forKey: owner)
        }
    }

    func applicationSignal(_ message: DBusMessage, from owner: String, generation: Int) {
        guard generation == self.generation, let member = message.member, let path = message.path else { return }
        switch (message.interface, member) {
        case (Self.propertiesInterface, "PropertiesChanged"):
            guard let interface = message.arguments.first?.string else { return }
            let changed = message.arguments.count > 1 ? message.arguments[1].dictionary ?? [:] : [:]
            let invalidated = message.arguments.count > 2 ? message.arguments[2].strings ?? [] : []
            if interface == Self.characteristicInterface, let value = changed["Value"]?.bytes {
                applicationValueChanged(owner: owner, path: path, value: value)
            } else if interface == Self.advertisementInterface {
                advertisementChanged(owner: owner, path: path, changed: changed, invalidated: invalidated)
            }
        case (Self.objectManagerInterface, "InterfacesRemoved"):
            guard let removed = message.arguments.first?.objectPath else { return }
            let names = message.arguments.count > 1 ? message.arguments[1].strings ?? [] : []
            let gatt = [Self.serviceInterface, Self.characteristicInterface, Self.descriptorInterface]
            guard names.contains(where: gatt.contains) else { return }
            for adapter in adapters {
                for application in adapter.applications
                where application.owner == owner && application.tree != nil
                    && removed.isDescendant(of: application.root)
                {
                    dropApplication(application, from: adapter)
                }
            }
        default:
            break
        }
    }

    /// A client left the bus: its applications and advertisements go (no Release: it is gone).
    func peripheralClientLeft(_ client: String) {
        for adapter in adapters {
            let applications = adapter.applications.filter { $0.owner == client }
            let advertisements = adapter.advertisements.filter { $0.owner == client }
            guard !applications.isEmpty || !advertisements.isEmpty else { continue }
            adapter.applications.removeAll { $0.owner == client }
            for advertisement in advertisements { cancel(advertisement.timeoutTimer) }
            adapter.advertisements.removeAll { $0.owner == client }
            advertisingInstancesChanged(adapter)
            peripheralChanged(adapter)
        }
        cccdSubscribers = cccdSubscribers.filter { $0.key.owner != client }
        if let watch = ownerWatches.removeValue(forKey: client) { watch.task.cancel() }
    }

    // MARK: Calls into applications

    /// Calls a method of an application object and hands the outcome to `done` on the loop
    /// (unless the simulator crashed meanwhile).
    func callApplication(
        _ target: ApplicationObject, interface: String, _ method: String, _ arguments: [DBusValue] = [],
        done: (@Sendable (isolated BlueZSimulator, Result<[DBusValue], DBusError>) -> Void)? = nil
    ) {
        guard let connection else { return }
        let generation = self.generation
        Task {
            let result: Result<[DBusValue], DBusError>
            do {
                result = .success(
                    try await connection.call(
                        destination: target.owner, path: target.path, interface: interface, method: method,
                        arguments: arguments))
            } catch let error as DBusError {
                result = .failure(error)
            } catch {
                result = .failure(DBusError(.failed, "\(error)"))
            }
            guard generation == self.generation else { return }
            done?(self, result)
        }
    }

    /// The options bluetoothd 5.66 passes to an application's ReadValue/WriteValue:
    /// `device`, `mtu`, `link` and `offset` only when not 0 (no `type`).
    func applicationOptions(device: DBusObjectPath, offset: UInt16) -> DBusValue {
        var pairs: [(String, DBusValue)] = [
            ("device", .objectPath(device)), ("mtu", .uint16(timing.mtu)), ("link", .string("LE")),
        ]
        if offset != 0 { pairs.append(("offset", .uint16(offset))) }
        return .variantDictionary(pairs)
    }
}
