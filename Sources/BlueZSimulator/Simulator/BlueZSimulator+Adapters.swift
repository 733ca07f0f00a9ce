import DBus

/// Adapters that cannot be used the ways a real one cannot: blocked by rfkill, or not there at
/// all (a USB dongle unplugged, a controller the kernel never brought up).
extension BlueZSimulator {
    /// Blocks or unblocks the adapter's radio, as `rfkill block bluetooth` does. Blocked, it is
    /// powered off, `PowerState` (when exported) says `off-blocked` and setting `Powered` to true fails
    /// (`org.bluez.Error.Failed` "Blocked through rfkill"). Unblocked, it is powered on again
    /// when it was on before the block (bluetoothd restores the power state).
    public func setBlocked(adapter name: String, _ blocked: Bool) {
        guard let adapter = adapter(named: name), adapter.blocked != blocked else { return }
        log?("simulator: \(name) rfkill \(blocked ? "blocked" : "unblocked")")
        if blocked {
            adapter.poweredBeforeBlock = adapter.powered
            adapter.blocked = true
            setPowered(name, false)
            powerStateChanged(adapter)
        } else {
            adapter.blocked = false
            powerStateChanged(adapter)
            if adapter.poweredBeforeBlock { setPowered(name, true) }
        }
    }

    /// Announces the adapter's `PowerState` as it is now (when it has the property).
    func powerStateChanged(_ adapter: SimulatedAdapter) {
        guard adapter.present, adapter.spec.powerState else { return }
        change([("PowerState", .string(adapter.powerState))], interface: Self.adapterInterfaceName, at: adapter.path)
    }

    /// Plugs the adapter in (its object appears: `InterfacesAdded`) or out (it powers off, its
    /// devices and then its object go: `InterfacesRemoved`).
    public func setPresent(adapter name: String, _ present: Bool) throws {
        guard let adapter = adapter(named: name) else { throw ControlError.notFound("no adapter \(name)") }
        guard adapter.present != present else { return }
        log?("simulator: \(name) \(present ? "plugged in" : "unplugged")")
        if present {
            adapter.present = true
            let interfaces = adapterInterfaces(adapter)
            withBus { try $0.export(interfaces, at: adapter.path, announce: true) }
        } else {
            setPowered(name, false)
            for path in deviceOrder {
                if let device = devices[path], device.adapter === adapter { unexportDevice(device) }
            }
            flushSignals()
            adapter.present = false
            forgetSignals(under: adapter.path)
            withBus { try $0.unexport(at: adapter.path, announce: true) }
        }
    }

    /// The interfaces of an adapter's object.
    func adapterInterfaces(_ adapter: SimulatedAdapter) -> [DBusInterface] {
        [adapterInterface(adapter), gattManagerInterface(adapter), advertisingManagerInterface(adapter)]
    }
}
