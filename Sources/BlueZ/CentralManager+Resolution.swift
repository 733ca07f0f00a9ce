import DBus

/// `ServicesResolved=true` is taken only once the GATT objects it announces are known.
///
/// bluetoothd (5.66 and later, bluez issue #1489) queues the `InterfacesAdded` of a device's GATT
/// objects and the device's own property changes separately and flushes them in an order that
/// depends on what else was pending: `{ServicesResolved: true}` can arrive after all objects,
/// between them, or before all of them — typically on a device's first connection. A client that
/// lists services on that signal then sees some or none (seen in the real-BlueZ VM: `gattway
/// inspect` printing `"services":[]`). The objects are registered before the property is set, so
/// a `GetManagedObjects` issued after the signal always contains them: the manager asks once per
/// resolution, adds the objects it has not seen yet (and takes the `MTU` of those it has, which
/// bluetoothd does not signal on a reconnection), and only then records `ServicesResolved` and
/// wakes whoever waits for it (``discoverServices(_:for:)``, notification subscriptions).
extension CentralManager {
    /// Called for our device's `ServicesResolved` false→true change, which the caller did not apply.
    func confirmServicesResolved(_ path: DBusObjectPath) {
        let id = makeID()
        let owner = bluezOwner
        pendingResolutions[path] = id
        Task {
            let reply = try? await connection.call(
                destination: "org.bluez", path: .root, interface: "org.freedesktop.DBus.ObjectManager",
                method: "GetManagedObjects", timeout: .seconds(25))
            // Superseded (ServicesResolved=false, the link dropped, another resolution) or a
            // different bluetoothd by now: nothing to confirm.
            guard pendingResolutions[path] == id, bluezOwner == owner, !closed else { return }
            pendingResolutions.removeValue(forKey: path)
            if let objects = reply?.first {
                let prefix = path.rawValue + "/"
                for entry in objects.entries ?? [] {
                    guard let object = entry.key.objectPath, object.rawValue.hasPrefix(prefix) else { continue }
                    if tree.contains(object) {
                        refreshMTU(object, interfaces: entry.value)
                    } else {
                        tree.add(object, interfaces: entry.value)
                    }
                }
            }
            guard
                tree.change(
                    path, interface: BlueZObjectTree.device, changed: ["ServicesResolved": .boolean(true)],
                    invalidated: [])
            else { return }
            if let address = address(ofDevicePath: path) { servicesResolved(address) }
            evaluateWaiters()
        }
    }

    /// Takes a known characteristic's `MTU` from the resolution's `GetManagedObjects` (its
    /// interfaces, `a{sa{sv}}`). bluetoothd sets `MTU` without a signal when a device it has
    /// connected before (its GATT objects cached) connects again, and removes it silently at the
    /// disconnect (docs/bluez.md), so the copy kept from signals is missing or stale; this reply,
    /// asked for after `ServicesResolved` (after the MTU exchange), has the link's value. Absent
    /// there (bluetoothd before 5.62), it is absent here too. No extra call: the reply is made anyway.
    private func refreshMTU(_ object: DBusObjectPath, interfaces: DBusValue) {
        guard
            let properties = interfaces.entries?.first(where: { $0.key.string == BlueZObjectTree.characteristic })?
                .value
        else { return }
        let mtu = properties.entries?.first { $0.key.string == "MTU" }?.value
        tree.change(
            object, interface: BlueZObjectTree.characteristic, changed: mtu.map { ["MTU": $0] } ?? [:],
            invalidated: mtu == nil ? ["MTU"] : [])
    }

    /// A pending confirmation no longer applies (the device lost its resolution or its link).
    func cancelServicesResolved(_ path: DBusObjectPath) {
        pendingResolutions.removeValue(forKey: path)
    }
}
