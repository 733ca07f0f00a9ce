import Bluetooth
import DBus

/// Which of bluetoothd's signals the bus sends the central (docs/bluez.md §7.2).
///
/// On the D-Bus path (``CentralOptions/ReportSource/bluez``) one rule, `sender='org.bluez'`: every
/// signal, the advertisement reports among them (`Device1`'s `RSSI`, `ManufacturerData`,
/// `ServiceData`… in `PropertiesChanged`). On the kernel's path (``CentralOptions/ReportSource/kernel``)
/// the reports come from the management socket and those signals are waste — bluetoothd sends
/// one per report of a discoverable device, and decoding it cost the gateway more than the
/// report itself —, so the bus is asked only for
///
/// - the object manager's `InterfacesAdded` / `InterfacesRemoved` (devices, adapters and GATT
///   objects appearing and going),
/// - `PropertiesChanged` of `org.bluez.Adapter1` (`Powered`, `PowerState`, `Discovering`…),
/// - everything below the devices the central deals with (``CentralManager/watchedDevices``: a
///   connection wanted, tried, adopted or up, a notification subscription, a pairing running):
///   one `path_namespace` rule each, so their `Connected`, `ServicesResolved` and their
///   characteristics' `Value` come as before.
///
/// The central applies one local rule (`sender='org.bluez'`, ``DBusConnection/handleSignals(matching:onBus:_:)``
/// with `onBus` false) to what these rules bring, so every signal is handled once and in the
/// order bluetoothd sent it, whichever rules matched it.
struct BlueZMatchRules {
    /// The rules on the bus now (added, or being added by the running update).
    var applied: Set<DBusMatchRule> = []
    /// An update is queued and has not started yet: a caller that needs one can wait for it.
    var updateQueued = false
    /// The last update (later ones run after it, one at a time).
    var update: Task<Void, Never>?
    /// Devices held watched while an operation runs on them (pairing, a connect about to be
    /// tried), by address, with how many operations hold each.
    var holds: [BluetoothAddress: Int] = [:]
    /// The error of the last `AddMatch` that failed (nil once one succeeds again).
    var lastError: DBusError?

    static let sender = "org.bluez"

    /// Every signal of bluetoothd: the D-Bus path's rule, and the central's local filter.
    static let everything = DBusMatchRule(sender: sender)
    /// `InterfacesAdded` and `InterfacesRemoved` (bluetoothd's object manager is at `/`).
    static let objectManager = DBusMatchRule(
        sender: sender, path: .root, interface: "org.freedesktop.DBus.ObjectManager")
    /// Property changes of adapters (`arg0` is the interface whose properties changed).
    static let adapters = DBusMatchRule(
        sender: sender, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
        arguments: [0: BlueZObjectTree.adapter])

    /// Everything below one device: its `Device1` changes and its GATT objects'.
    static func device(_ path: DBusObjectPath) -> DBusMatchRule {
        DBusMatchRule(sender: sender, pathNamespace: path)
    }

    /// The D-Bus path's rules: every signal of bluetoothd; with `adapter`
    /// (``CentralOptions/adapterSignalsOnly``: one central per adapter in one process) only the
    /// object manager's and those below that adapter, so that a report another adapter heard is
    /// not delivered and decoded here too.
    static func broad(adapter: DBusObjectPath?) -> Set<DBusMatchRule> {
        guard let adapter else { return [everything] }
        return [DBusMatchRule(sender: sender, path: .root), DBusMatchRule(sender: sender, pathNamespace: adapter)]
    }

    /// The rules for `source`, with `devices` the paths of the devices watched and `adapter` as
    /// in ``broad(adapter:)``.
    static func wanted(for source: CentralOptions.ReportSource, devices: [DBusObjectPath], adapter: DBusObjectPath?)
        -> Set<DBusMatchRule>
    {
        switch source {
        case .bluez: broad(adapter: adapter)
        case .kernel: Set([objectManager, adapters] + devices.map(device))
        }
    }

    /// The device a per-device rule is for, or nil for another rule (an adapter's subtree too).
    static func watchedPath(of rule: DBusMatchRule) -> DBusObjectPath? {
        guard rule.sender == sender, rule.path == nil, rule.interface == nil, let path = rule.pathNamespace,
            path.rawValue.contains("/dev_")
        else { return nil }
        return path
    }
}

extension CentralManager {
    /// The addresses whose signals the central needs on the kernel's path: a connection wanted
    /// (also while it is being retried) or adopted, a notification subscription, an operation
    /// holding it (``BlueZMatchRules/holds``), or — for one already watched — a link still up
    /// (a ``disconnect(_:)`` waits for its `Connected=false`).
    var watchedDevices: Set<BluetoothAddress> {
        var addresses = Set(links.keys)
        addresses.formUnion(matchRules.holds.keys)
        for key in subscriptions.keys { addresses.insert(key.peripheral) }
        for rule in matchRules.applied {
            guard let path = BlueZMatchRules.watchedPath(of: rule), tree.device(path)?.isConnected == true,
                let address = tree.device(path)?.address
            else { continue }
            addresses.insert(address)
        }
        return addresses
    }

    /// The rules bluetoothd's signals should reach the central by now.
    var wantedMatchRules: Set<DBusMatchRule> {
        let paths = reports == .kernel ? watchedDevices.compactMap(devicePath) : []
        return BlueZMatchRules.wanted(for: reports, devices: paths, adapter: scopedAdapter)
    }

    /// The adapter whose subtree alone the D-Bus path's rules cover
    /// (``CentralOptions/adapterSignalsOnly``), nil: every signal of bluetoothd.
    var scopedAdapter: DBusObjectPath? {
        guard options.adapterSignalsOnly, case .name(let name) = options.adapter else { return nil }
        return try? DBusObjectPath("/org/bluez/" + name)
    }

    /// Brings the bus's rules in line with ``wantedMatchRules`` and returns once they are (one
    /// update at a time; a caller finding one queued waits for that one, which sees its change).
    /// New rules are added before old ones are removed, so a signal wanted by both is never
    /// missed in between; a device newly watched on the kernel's path has its `Device1`
    /// properties read again (``refreshDevice(_:)``): what changed before its rule was in place
    /// was not signalled to the central. Back on the D-Bus path every device is read again
    /// (``refreshAllDevices()``).
    func updateMatchRules() async {
        if !matchRules.updateQueued, matchRules.applied == wantedMatchRules { return }
        if matchRules.updateQueued, let pending = matchRules.update { return await pending.value }
        let previous = matchRules.update
        matchRules.updateQueued = true
        let update = Task {
            await previous?.value
            await self.applyMatchRules()
        }
        matchRules.update = update
        await update.value
    }

    /// ``updateMatchRules()`` without waiting for it.
    func scheduleMatchRuleUpdate() {
        guard !closed, !matchRules.updateQueued, matchRules.applied != wantedMatchRules else { return }
        Task { await self.updateMatchRules() }
    }

    /// Holds `address` watched while `body` runs (a pairing, a connection attempt): the rule is
    /// on the bus before `body` starts.
    func whileWatched<T>(_ address: BluetoothAddress, _ body: () async throws -> T) async throws -> T {
        matchRules.holds[address, default: 0] += 1
        defer {
            matchRules.holds[address, default: 1] -= 1
            if matchRules.holds[address] == 0 { matchRules.holds.removeValue(forKey: address) }
            scheduleMatchRuleUpdate()
        }
        await updateMatchRules()
        return try await body()
    }

    private func applyMatchRules() async {
        matchRules.updateQueued = false
        guard !closed else { return }
        let wanted = wantedMatchRules
        let broad = BlueZMatchRules.broad(adapter: scopedAdapter)
        let wasEverything = matchRules.applied.isSuperset(of: broad)
        var added: [DBusObjectPath] = []
        for rule in wanted.subtracting(matchRules.applied).sorted(by: { $0.description < $1.description }) {
            do {
                try await connection.addMatch(rule)
                matchRules.applied.insert(rule)
                matchRules.lastError = nil
                if let path = BlueZMatchRules.watchedPath(of: rule) { added.append(path) }
            } catch let error as DBusError {
                matchRules.lastError = error
            } catch {}
        }
        // Only once the new rules are in: what both want is never missed in between. Against
        // what is wanted now, not at the start (an address held meanwhile keeps its rule).
        let unwanted = matchRules.applied.subtracting(wantedMatchRules)
        matchRules.applied.subtract(unwanted)
        for rule in unwanted { await connection.removeMatch(rule) }
        if reports == .bluez, !wasEverything, matchRules.applied.isSuperset(of: broad),
            bluezOwner != nil
        {
            await refreshAllDevices()
        } else if reports == .kernel, !wasEverything {
            for path in added { await refreshDevice(path) }
        }
    }

    /// Reads a newly watched device's `Device1` properties and applies them as a
    /// `PropertiesChanged` carrying all of them would be: a link that came up or went down
    /// while the device was not watched is reported now.
    func refreshDevice(_ path: DBusObjectPath) async {
        guard tree.device(path) != nil,
            let reply = try? await callBlueZ(
                path, "org.freedesktop.DBus.Properties", "GetAll", [.string(BlueZObjectTree.device)],
                timeout: .seconds(5)),
            let properties = reply.first
        else { return }
        applyRefreshed(path, properties)
        evaluateWaiters()
    }

    /// Back on the D-Bus path after the kernel's: every device's properties are read again
    /// (`GetManagedObjects`), as the signals of most were not sent to the central meanwhile, and
    /// applied as changes: scans report what devices advertise now, not what they advertised
    /// when the kernel's path began.
    func refreshAllDevices() async {
        guard
            let reply = try? await callBlueZ(
                .root, "org.freedesktop.DBus.ObjectManager", "GetManagedObjects", timeout: .seconds(25)),
            let objects = reply.first
        else { return }
        for entry in objects.entries ?? [] {
            guard let path = entry.key.objectPath, tree.device(path) != nil,
                let properties = entry.value.entries?.first(where: { $0.key.string == BlueZObjectTree.device })?.value
            else { continue }
            // Reported to scans only while seen (with an RSSI), as reportKnownDevices does.
            applyRefreshed(
                path, properties, advertised: properties.entries?.contains { $0.key.string == "RSSI" } == true)
        }
        evaluateWaiters()
    }

    /// Applies a device's properties as read (an `a{sv}`): the kept ones it lacks are invalidated.
    private func applyRefreshed(_ path: DBusObjectPath, _ properties: DBusValue, advertised: Bool = true) {
        let changes = PropertyChanges(properties)
        let absent = DeviceObject.keys.filter { changes[$0] == nil }
        deviceChanged(path, changed: changes, invalidated: absent, advertised: advertised)
    }

    /// The bus's rules for bluetoothd's signals now (their `AddMatch` strings), for tests and
    /// diagnostics.
    package var signalMatchRules: [String] { matchRules.applied.map(\.description).sorted() }
}
