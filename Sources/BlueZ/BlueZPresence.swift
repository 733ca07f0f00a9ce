import DBus

/// A manager that keeps BlueZ's objects (the central and the peripheral manager).
protocol ObjectTreeHolder: Actor {
    var tree: BlueZObjectTree { get set }
}

/// What the central and the peripheral manager share about BlueZ being there: reading its
/// objects, the state they imply, and why an operation cannot run in a state.
enum BlueZPresence {
    /// The outcome of `GetManagedObjects` on `org.bluez`.
    enum Fetched {
        case objects(DBusValue)
        /// The bus refused (`AccessDenied`): the state is `.unauthorized`.
        case accessDenied
        /// bluetoothd did not answer (gone, restarting).
        case unavailable
        /// An empty reply: nothing changes.
        case empty
    }

    /// Reads every object of bluetoothd (once at start and after each restart; never polled).
    /// Runs on the caller's actor (`isolation`): a manager sharing the connection's loop gets the
    /// reply before any signal sent after it is handled (see `DBusConnection`'s dispatch), so the
    /// snapshot it loads is never older than a change it has already applied.
    static func fetchObjects(_ connection: DBusConnection, isolation: isolated (any Actor)? = #isolation) async
        -> Fetched
    {
        do {
            let reply = try await connection.call(
                destination: "org.bluez", path: .root, interface: "org.freedesktop.DBus.ObjectManager",
                method: "GetManagedObjects", timeout: .seconds(25))
            return reply.first.map(Fetched.objects) ?? .empty
        } catch let error as DBusError where error.name == .accessDenied {
            return .accessDenied
        } catch {
            return .unavailable
        }
    }

    /// Reads every object into `tree` (``fetchObjects(_:isolation:)``), applying again over the
    /// snapshot what signals changed while it was awaited (``BlueZObjectTree/load(_:)``); a
    /// snapshot whose journal had to be given up is read again, at most three times in all.
    /// `.objects` means the tree holds the snapshot; otherwise the tree is unchanged.
    static func reload(_ connection: DBusConnection, into owner: isolated some ObjectTreeHolder) async -> Fetched {
        var attempts = 0
        while true {
            attempts += 1
            owner.tree.beginSnapshot()
            let fetched = await fetchObjects(connection, isolation: owner)
            guard case .objects(let objects) = fetched else {
                owner.tree.endSnapshot()
                return fetched
            }
            if owner.tree.load(objects) || attempts == 3 { return fetched }
        }
    }

    /// The state with the chosen adapter: `.unsupported` without bluetoothd or adapter, else from `Powered`.
    static func state(bluezPresent: Bool, adapterPath: DBusObjectPath?, tree: BlueZObjectTree) -> CentralState {
        guard bluezPresent, let adapterPath, let props = tree.properties(adapterPath, BlueZObjectTree.adapter) else {
            return .unsupported
        }
        return props["Powered"]?.bool == true ? .poweredOn : .poweredOff
    }

    /// Why nothing works in `state`: a code name shared by ``CentralError/Code`` and
    /// ``PeripheralError/Code`` (`poweredOff`, `unauthorized`, `bluezUnavailable`, `failed`) and a message.
    static func unavailability(
        _ state: CentralState, manager: String, adapterName: String, selector: AdapterSelector, role: String,
        bluezPresent: Bool
    ) -> (code: String, message: String) {
        switch state {
        case .poweredOn: ("failed", "no error")
        case .poweredOff: ("poweredOff", "the adapter \(adapterName) is powered off")
        case .unauthorized: ("unauthorized", "the bus denied access to org.bluez")
        case .unsupported:
            bluezPresent
                ? (
                    "bluezUnavailable",
                    "no Bluetooth adapter matching \(selector)" + (role == "central" ? "" : " with the \(role) role")
                )
                : ("bluezUnavailable", "bluetoothd (org.bluez) is not on the bus")
        case .resetting: ("bluezUnavailable", "bluetoothd restarted; waiting for it")
        case .unknown: ("bluezUnavailable", "the \(manager) is not ready yet")
        }
    }

    /// `hci0` from `/org/bluez/hci0`, else the selector's description.
    static func adapterName(_ path: DBusObjectPath?, selector: AdapterSelector) -> String {
        path.map { String($0.rawValue.split(separator: "/").last ?? "") } ?? "\(selector)"
    }
}

extension CentralManager: ObjectTreeHolder {}
extension PeripheralManager: ObjectTreeHolder {}
