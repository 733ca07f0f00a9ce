import Bluetooth
import DBus
import EventLoop

/// The bus side of the peripheral role: the simulator's calls into applications and its watch on
/// their signals. The registrations themselves are the adapters' (``AdvertisingManager``,
/// ``GATTApplications``).
/// A manager of the peripheral role that applications register objects with
/// (``AdvertisingManager``, ``GATTApplications``), through ``BlueZSimulator/register(_:_:with:)``.
protocol RegistrationManager: AnyObject {
    associatedtype Registration
    /// The adapter that owns the manager (held unowned by it).
    var adapter: SimulatedAdapter { get }
    /// Takes the registration of `path` by `owner`, or throws bluetoothd's refusal.
    func reserve(owner: String, path: DBusObjectPath) throws -> Registration
    /// Reads the registration from its application and answers the call with `reply`.
    func read(
        _ registration: Registration, _ reply: DBusPendingReply, generation: Int, in simulator: isolated BlueZSimulator
    ) async
}

extension BlueZSimulator {
    static let objectManagerInterface = "org.freedesktop.DBus.ObjectManager"
    static let propertiesInterface = "org.freedesktop.DBus.Properties"

    // MARK: Registering

    /// The caller and the object path of `RegisterApplication(o, a{sv})` or
    /// `RegisterAdvertisement(o, a{sv})`. The export layer does not check these signatures, so
    /// wrong arguments get bluetoothd's InvalidArguments rather than its InvalidArgs.
    static func registration(_ call: DBusMessage) throws -> (owner: String, path: DBusObjectPath) {
        guard let owner = call.sender, call.arguments.count == 2, case .objectPath(let path) = call.arguments[0],
            case .dictionary(.string, _, _) = call.arguments[1]
        else { throw BlueZError.invalidArguments }
        return (owner, path)
    }

    /// Takes a `RegisterApplication(o, a{sv})` or `RegisterAdvertisement(o, a{sv})` call for
    /// `manager`: its caller and object path reserved (``RegistrationManager/reserve(owner:path:)``
    /// throws bluetoothd's refusal), then read from the application in a task of its own — the
    /// loop keeps running — which answers the call.
    func register(_ call: DBusMessage, _ reply: DBusPendingReply, with manager: some RegistrationManager) throws {
        let (owner, path) = try Self.registration(call)
        let registration = try manager.reserve(owner: owner, path: path)
        let generation = self.generation
        // The task holds the adapter (which owns the manager) until the read is settled.
        let adapter = manager.adapter
        Task {
            defer { withExtendedLifetime(adapter) {} }
            await manager.read(registration, reply, generation: generation, in: self)
        }
    }

    /// The caller and the object path of `UnregisterApplication(o)` or `UnregisterAdvertisement(o)`.
    static func unregistration(_ call: DBusMessage) throws -> (owner: String, path: DBusObjectPath) {
        guard let owner = call.sender, call.arguments.count == 1, case .objectPath(let path) = call.arguments[0] else {
            throw BlueZError.invalidArguments
        }
        return (owner, path)
    }

    /// Reads a registration from its application: watches `owner`'s signals from now on, calls
    /// `method` on it (GetAll of an advertisement, GetManagedObjects of an application) and makes
    /// the outcome of the answer with `read`, or of a failed call with `unreadable`. Nil when the
    /// registration no longer stands once the answer is there (a crash meanwhile, or `registered`
    /// says it was dropped): the watch is then given back and the caller gets Failed `refusal`.
    /// Otherwise `watching` says whether the watch was taken (to give back if it is refused).
    func readRegistration<Value, Refusal: Error>(
        owner: String, path: DBusObjectPath, interface: String, method: String, arguments: [DBusValue] = [],
        generation: Int, _ reply: DBusPendingReply, refusal: String, registered: () -> Bool,
        read: ([DBusValue]) -> Result<Value, Refusal>, unreadable: (any Error) -> Refusal
    ) async -> (outcome: Result<Value, Refusal>, watching: Bool)? {
        var watching = false
        let outcome: Result<Value, Refusal>
        do {
            guard let connection else { throw DBusError(.disconnected, "crashed") }
            try await watchOwner(owner)
            watching = true
            outcome = read(
                try await connection.call(
                    destination: owner, path: path, interface: interface, method: method, arguments: arguments))
        } catch {
            outcome = .failure(unreadable(error))
        }
        guard generation == self.generation, registered() else {
            if watching && generation == self.generation { unwatchOwner(owner) }
            reply.fail(BlueZError.failed(refusal))
            return nil
        }
        return (outcome, watching)
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
            } else if interface == AdvertisingManager.advertisementInterface {
                for adapter in adapters {
                    adapter.advertising.propertiesChanged(
                        owner: owner, path: path, changed: changed, invalidated: invalidated, in: self)
                }
            }
        case (Self.objectManagerInterface, "InterfacesRemoved"):
            guard let removed = message.arguments.first?.objectPath else { return }
            let names = message.arguments.count > 1 ? message.arguments[1].strings ?? [] : []
            let gatt = [Self.serviceInterface, Self.characteristicInterface, Self.descriptorInterface]
            guard names.contains(where: gatt.contains) else { return }
            for adapter in adapters { adapter.gatt.objectsRemoved(owner: owner, at: removed, in: self) }
        default:
            break
        }
    }

    /// A client left the bus: its applications and advertisements go (no Release: it is gone).
    func peripheralClientLeft(_ client: String) {
        for adapter in adapters {
            let applications = adapter.gatt.removeAll(owner: client)
            let advertisements = adapter.advertising.clientLeft(client, in: self)
            guard applications || advertisements else { continue }
            adapter.advertising.instancesChanged(in: self)
            peripheralChanged(adapter)
        }
        for adapter in adapters { adapter.gatt.forgetSubscriptions(owner: client) }
        if let watch = ownerWatches.removeValue(forKey: client) { watch.task.cancel() }
    }

    // MARK: Calls into applications

    /// Calls a method of an application object and hands the outcome to `done` on the loop
    /// (unless the simulator crashed meanwhile).
    func callApplication(
        _ target: ApplicationObject, interface: String, _ method: String, _ arguments: [DBusValue] = [],
        done: ((Result<[DBusValue], DBusError>) -> Void)? = nil
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
            done?(result)
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
