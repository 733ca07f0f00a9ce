import Bluetooth
import DBus
import EventLoop

/// A GATT application registered through `GattManager1.RegisterApplication`. Not Sendable: owned
/// by its adapter's ``GATTApplications``, touched only in the ``BlueZSimulator`` actor's isolation.
final class RegisteredApplication {
    let owner: String
    let root: DBusObjectPath
    /// The tree as read at registration (nil while bluetoothd still waits for GetManagedObjects).
    var tree: LocalApplicationTree?

    init(owner: String, root: DBusObjectPath) {
        self.owner = owner
        self.root = root
    }
}

/// An object of a registered GATT application: its owner's unique name and path, with the server flags.
struct ApplicationObject: Hashable {
    var owner: String
    var path: DBusObjectPath
    var flags: [String]
}

/// One adapter's `org.bluez.GattManager1` and local GATT database (bluetoothd 5.66
/// `src/gatt-database.c`): the registered applications in registration order, the handles they
/// were given, and which linked centrals enabled the CCCD of which application characteristic.
/// What it decides alone (``reserve(owner:path:)``, ``accept(_:for:)``, ``remoteLayout()``, the
/// CCCD bookkeeping) needs no bus; the methods taking the simulator read the application, reply
/// and call it. Not Sendable: owned by its ``SimulatedAdapter``.
final class GATTApplications: RegistrationManager {
    static let interfaceName = "org.bluez.GattManager1"

    /// The adapter it belongs to (which owns it).
    unowned let adapter: SimulatedAdapter
    /// In registration order; an entry exists from the call on (so a second call is
    /// AlreadyExists), `tree` once it was read.
    private(set) var applications: [RegisteredApplication] = []
    /// The next free handle of the local database (after bluetoothd's own services).
    private(set) var nextHandle: UInt16
    /// Per application characteristic, the linked central devices whose CCCD is enabled.
    private(set) var subscribers: [ApplicationObject: Set<DBusObjectPath>] = [:]

    init(adapter: SimulatedAdapter) {
        self.adapter = adapter
        nextHandle = GATTLayout.bluezLocal(name: adapter.spec.alias).nextFreeHandle
    }

    /// Takes the registration of `owner`'s application at `root` (until it is read or refused).
    /// - Throws: `AlreadyExists` for the same owner and root (also while the first is being read).
    func reserve(owner: String, path root: DBusObjectPath) throws -> RegisteredApplication {
        guard !applications.contains(where: { $0.owner == owner && $0.root == root }) else {
            throw BlueZError.alreadyExists
        }
        let application = RegisteredApplication(owner: owner, root: root)
        applications.append(application)
        return application
    }

    func contains(_ application: RegisteredApplication) -> Bool {
        applications.contains { $0 === application }
    }

    /// Lays `tree` into the database from the next free handle and keeps it as `application`'s;
    /// returns the handles to write back to the application.
    func accept(_ tree: LocalApplicationTree, for application: RegisteredApplication) -> [(
        path: DBusObjectPath, interface: String, handle: UInt16
    )] {
        var tree = tree
        tree.layOut(from: &nextHandle)
        application.tree = tree
        return tree.handleWriteBacks
    }

    /// Removes an application and the CCCD subscriptions of its characteristics.
    func remove(_ application: RegisteredApplication) {
        applications.removeAll { $0 === application }
        subscribers = subscribers.filter { key, _ in
            !(key.owner == application.owner && key.path.isDescendant(of: application.root))
        }
    }

    /// Removes `owner`'s applications; true when it had some.
    func removeAll(owner: String) -> Bool {
        let had = applications.contains { $0.owner == owner }
        applications.removeAll { $0.owner == owner }
        return had
    }

    /// Forgets the CCCD subscriptions of `owner`'s characteristics.
    func forgetSubscriptions(owner: String) {
        subscribers = subscribers.filter { $0.key.owner != owner }
    }

    /// A linked central enabled the CCCD of `target`; true when it had not (the application is
    /// then told: StartNotify).
    func subscribe(_ device: DBusObjectPath, to target: ApplicationObject) -> Bool {
        subscribers[target, default: []].insert(device).inserted
    }

    /// A linked central disabled the CCCD of `target`; true when it was the last subscriber (the
    /// application is then told: StopNotify).
    func unsubscribe(_ device: DBusObjectPath, from target: ApplicationObject) -> Bool {
        guard var devices = subscribers[target], devices.remove(device) != nil else { return false }
        subscribers[target] = devices.isEmpty ? nil : devices
        return devices.isEmpty
    }

    /// The local database as a remote peer shows it: bluetoothd's own GAP, GATT and Device
    /// Information services, then every registered application's services at their handles; and
    /// which application object answers for each attribute handle.
    func remoteLayout() -> (GATTLayout, [UInt16: ApplicationObject]) {
        var layout = GATTLayout.bluezLocal(name: adapter.spec.alias)
        var byHandle: [UInt16: ApplicationObject] = [:]
        for application in applications {
            guard let tree = application.tree else { continue }
            for service in tree.services {
                var characteristics: [GATTLayout.Characteristic] = []
                for characteristic in service.characteristics {
                    var descriptors: [GATTLayout.Descriptor] = []
                    if let cccd = characteristic.cccdHandle {
                        descriptors.append(GATTLayout.Descriptor(uuid: GATTLayout.cccd, handle: cccd, value: [0, 0]))
                    }
                    for descriptor in characteristic.descriptors {
                        descriptors.append(
                            GATTLayout.Descriptor(uuid: descriptor.uuid, handle: descriptor.handle, value: []))
                        byHandle[descriptor.handle] = ApplicationObject(
                            owner: application.owner, path: descriptor.path, flags: descriptor.flags)
                    }
                    characteristics.append(
                        GATTLayout.Characteristic(
                            spec: CharacteristicSpec(uuid: characteristic.uuid, flags: characteristic.clientFlags),
                            handle: characteristic.handle, valueHandle: characteristic.valueHandle,
                            descriptors: descriptors))
                    byHandle[characteristic.handle] = ApplicationObject(
                        owner: application.owner, path: characteristic.path, flags: characteristic.flags)
                }
                layout.services.append(
                    GATTLayout.Service(
                        uuid: service.uuid, handle: service.handle, characteristics: characteristics,
                        exported: !GATTLayout.hidden.contains(service.uuid)))
            }
        }
        layout.services.sort { $0.handle < $1.handle }
        return (layout, byHandle)
    }

    // MARK: On the bus

    /// `RegisterApplication(o root, a{sv} options)`: ``reserve(owner:path:)``; then
    /// (asynchronously, the loop keeps running) `GetManagedObjects` on the caller at `root`, the
    /// tree checked and laid out, `Handle` written back where the app exported 0, and only then
    /// the reply.
    func read(
        _ application: RegisteredApplication, _ reply: DBusPendingReply, generation: Int,
        in simulator: isolated BlueZSimulator
    ) async {
        guard
            let (outcome, watching) = await simulator.readRegistration(
                owner: application.owner, path: application.root, interface: BlueZSimulator.objectManagerInterface,
                method: "GetManagedObjects", generation: generation, reply, refusal: "Failed to register application",
                registered: { contains(application) },
                read: { values in
                    Result { () throws(LocalApplicationTree.Refusal) in
                        try LocalApplicationTree(
                            managedObjects: values.first ?? .array(.byte, []), root: application.root)
                    }
                },
                unreadable: { error in
                    simulator.log?(
                        "simulator: GetManagedObjects on \(application.owner) \(application.root) failed: \(error)")
                    return .noObject
                })
        else { return }
        switch outcome {
        case .failure(let refusal):
            simulator.log?("simulator: application \(application.root) of \(application.owner) refused: \(refusal)")
            remove(application)
            if watching { simulator.unwatchOwner(application.owner) }
            reply.fail(refusal.error)
        case .success(let tree):
            let writeBacks = accept(tree, for: application)
            let owner = application.owner
            simulator.withBus { connection in
                for writeBack in writeBacks {
                    try connection.send(
                        destination: owner, path: writeBack.path,
                        interface: BlueZSimulator.propertiesInterface, method: "Set",
                        arguments: [
                            .string(writeBack.interface), .string("Handle"), .variant(.uint16(writeBack.handle)),
                        ])
                }
            }
            simulator.log?(
                "simulator: \(adapter.spec.name) registered application \(application.root) of \(application.owner)")
            reply.succeed()
            simulator.peripheralChanged(adapter)
        }
    }

    /// `UnregisterApplication(o root)`: only the caller's own; DoesNotExist otherwise.
    func unregister(_ call: DBusMessage, in simulator: isolated BlueZSimulator) throws {
        let (owner, root) = try BlueZSimulator.unregistration(call)
        guard let application = applications.first(where: { $0.owner == owner && $0.root == root }) else {
            throw BlueZError.doesNotExist
        }
        drop(application, in: simulator)
    }

    /// Removes an application from the local database (linked centrals see its services go).
    func drop(_ application: RegisteredApplication, in simulator: isolated BlueZSimulator) {
        remove(application)
        simulator.unwatchOwner(application.owner)
        simulator.log?(
            "simulator: \(adapter.spec.name) unregistered application \(application.root) of \(application.owner)")
        simulator.peripheralChanged(adapter)
    }

    /// The application removed GATT objects at `removed`: the applications rooted above them go.
    func objectsRemoved(owner: String, at removed: DBusObjectPath, in simulator: isolated BlueZSimulator) {
        for application in applications
        where application.owner == owner && application.tree != nil && removed.isDescendant(of: application.root) {
            drop(application, in: simulator)
        }
    }
}
