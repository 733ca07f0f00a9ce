import Bluetooth
import DBus

/// One local controller: power (and rfkill, and whether it is plugged in at all), its discovery
/// sessions, and the peripheral role's registrations (``advertising``, ``gatt``). What it decides
/// alone (``discoveryStartRefusal()``, ``powerState``) needs no bus; the methods taking the
/// simulator carry `Adapter1` out on it. Not Sendable: owned by the ``BlueZSimulator`` actor and
/// touched only in its isolation.
final class SimulatedAdapter {
    static let interfaceName = "org.bluez.Adapter1"

    let spec: AdapterSpec
    let path: DBusObjectPath
    var powered: Bool
    /// The adapter's object is on the bus (false: unplugged, ``BlueZSimulator/setPresent(adapter:_:)``).
    var present: Bool
    /// The radio is blocked by rfkill, and whether it was powered when it was blocked.
    var blocked: Bool
    var poweredBeforeBlock: Bool
    var sessions = DiscoverySessions()
    /// `StartDiscovery` calls still to refuse with InProgress (the `start_discovery_failures` knob).
    var startDiscoveryFailuresLeft: Int
    /// Advertisements registered here (LEAdvertisingManager1).
    private(set) lazy var advertising = AdvertisingManager(adapter: self)
    /// GATT applications registered here (GattManager1) and the local database.
    private(set) lazy var gatt = GATTApplications(adapter: self)

    init(spec: AdapterSpec) throws {
        self.spec = spec
        powered = spec.powered && !spec.rfkillBlocked
        present = spec.present
        blocked = spec.rfkillBlocked
        poweredBeforeBlock = spec.powered
        startDiscoveryFailuresLeft = spec.startDiscoveryFailures
        path = try DBusObjectPath("/org/bluez").appending(spec.name)
    }

    /// `Adapter1.PowerState`: `on`, `off` or `off-blocked`.
    var powerState: String { blocked ? "off-blocked" : powered ? "on" : "off" }

    /// The devices the simulator has on this adapter, in scenario order (then added ones).
    func devices(in simulator: isolated BlueZSimulator) -> [SimulatedDevice] {
        simulator.deviceOrder.compactMap { path in
            simulator.devices[path].flatMap { $0.adapter === self ? $0 : nil }
        }
    }

    // MARK: Discovery

    /// Why `StartDiscovery` is refused before the sessions are asked, if it is: off → NotReady;
    /// the `start_discovery_failures` knob → InProgress (one refusal used up).
    func discoveryStartRefusal() -> DBusError? {
        guard powered else { return BlueZError.notReady }
        guard startDiscoveryFailuresLeft == 0 else {
            startDiscoveryFailuresLeft -= 1
            return BlueZError.busy
        }
        return nil
    }

    func startDiscovery(_ client: String, in simulator: isolated BlueZSimulator) throws {
        guard powered else { throw BlueZError.notReady }
        simulator.counters.startDiscoveryCalls += 1
        if let refusal = discoveryStartRefusal() { throw refusal }
        if try sessions.start(client) {
            // The reply goes out during dispatch; Discovering=true follows at the end of the turn.
            simulator.change([("Discovering", .boolean(true))], interface: Self.interfaceName, at: path)
            simulator.managementStateChanged()
            simulator.startAdvertising(self)
        }
    }

    func stopDiscovery(_ client: String, in simulator: isolated BlueZSimulator) throws {
        guard powered else { throw BlueZError.notReady }
        if try sessions.stop(client) { discoveryStopped(in: simulator) }
    }

    func setDiscoveryFilter(_ entries: [DBusDictionaryEntry], for client: String) throws {
        guard powered else { throw BlueZError.notReady }
        sessions.setFilter(try DiscoveryFilter.parse(entries), for: client)
    }

    /// The last session ended (stop, client left, power-off): Discovering=false, RSSI and TxPower
    /// invalidated on every device, temporary devices last seen non-connectable removed at once,
    /// the adapter's devices off the advertising schedule (a scan started again before their next
    /// event would otherwise schedule each a second time: twice the reports, for good).
    func discoveryStopped(in simulator: isolated BlueZSimulator) {
        simulator.unschedule(self)
        for device in devices(in: simulator) { device.discoveryStopped(in: simulator) }
        // After the devices' RSSI/TxPower invalidation, as bluetoothd 5.66 orders them.
        simulator.change([("Discovering", .boolean(false))], interface: Self.interfaceName, at: path)
        simulator.managementStateChanged()
        // A monitor's passive scan takes over again.
        simulator.passiveScanChanged(self)
    }

    /// `Adapter1.RemoveDevice(o)`: forgets the device (a connected one is disconnected first,
    /// then removed, then the reply).
    func removeDevice(_ call: DBusMessage, _ reply: DBusPendingReply, in simulator: isolated BlueZSimulator) {
        guard powered else { return reply.fail(BlueZError.notReady) }
        guard let path = call.arguments[0].objectPath, let device = simulator.devices[path], device.adapter === self,
            device.exported
        else {
            return reply.fail(BlueZError.doesNotExist)
        }
        switch device.link {
        case .disconnected, .connecting:
            device.abortConnect(BlueZError.failed("br-connection-canceled"), in: simulator)
            device.unexport(in: simulator)
            reply.succeed()
        case .connected, .disconnecting:
            device.disconnect(nil, in: simulator) {
                simulator.devices[path]?.unexport(in: simulator)
                reply.succeed()
            }
        }
    }

    // MARK: Power, rfkill, presence

    /// Powers the adapter on or off. Off: discovery sessions dropped (Discovering=false), links
    /// dropped, pending connects fail, temporary non-connectable devices removed, Powered=false,
    /// advertisements released. `fromClient`: a client set `Powered` (the export layer signals it).
    func setPowered(_ on: Bool, fromClient: Bool = false, in simulator: isolated BlueZSimulator) {
        guard powered != on, !(on && blocked) else { return }
        powered = on
        simulator.log?("simulator: \(spec.name) powered \(on ? "on" : "off")")
        if !on {
            if sessions.dropAll() { discoveryStopped(in: simulator) }
            for device in devices(in: simulator) {
                switch device.link {
                case .disconnected: break
                case .connecting: device.abortConnect(BlueZError.failed("le-connection-abort-by-local"), in: simulator)
                case .connected, .disconnecting: device.linkDown(in: simulator)
                }
            }
        }
        if !fromClient {
            simulator.change([("Powered", .boolean(on))], interface: Self.interfaceName, at: path)
        }
        powerStateChanged(in: simulator)
        simulator.managementStateChanged()
        simulator.passiveScanChanged(self)
        // A powered-off controller stops advertising: bluetoothd releases the advertisements.
        if !on { advertising.releaseAll(in: simulator) }
        simulator.peripheralChanged(self)
    }

    /// Blocks or unblocks the radio, as `rfkill block bluetooth` does. Blocked, it is powered
    /// off, `PowerState` (when exported) says `off-blocked` and setting `Powered` to true fails
    /// (`org.bluez.Error.Failed` "Blocked through rfkill"). Unblocked, it is powered on again
    /// when it was on before the block (bluetoothd restores the power state).
    func setBlocked(_ blocked: Bool, in simulator: isolated BlueZSimulator) {
        guard self.blocked != blocked else { return }
        simulator.log?("simulator: \(spec.name) rfkill \(blocked ? "blocked" : "unblocked")")
        if blocked {
            poweredBeforeBlock = powered
            self.blocked = true
            setPowered(false, in: simulator)
            powerStateChanged(in: simulator)
        } else {
            self.blocked = false
            powerStateChanged(in: simulator)
            if poweredBeforeBlock { setPowered(true, in: simulator) }
        }
    }

    /// Announces `PowerState` as it is now (when the adapter has the property).
    func powerStateChanged(in simulator: isolated BlueZSimulator) {
        guard present, spec.powerState else { return }
        simulator.change([("PowerState", .string(powerState))], interface: Self.interfaceName, at: path)
    }

    /// Plugs the adapter in (its object appears: `InterfacesAdded`) or out (it powers off, its
    /// devices and then its object go: `InterfacesRemoved`).
    func setPresent(_ present: Bool, in simulator: isolated BlueZSimulator) {
        guard self.present != present else { return }
        simulator.log?("simulator: \(spec.name) \(present ? "plugged in" : "unplugged")")
        if present {
            self.present = true
            // bluetoothd powers an adapter it is given on (AutoEnable, true by default since
            // BlueZ 5.65): a dongle plugged in again comes back as it was configured.
            powered = spec.powered && !blocked
            let interfaces = simulator.adapterInterfaces(self)
            let path = self.path
            simulator.withBus { try $0.export(interfaces, at: path, announce: true) }
            simulator.managementStateChanged()
        } else {
            setPowered(false, in: simulator)
            for device in devices(in: simulator) { device.unexport(in: simulator) }
            simulator.flushSignals()
            self.present = false
            simulator.forgetSignals(under: path)
            let path = self.path
            simulator.withBus { try $0.unexport(at: path, announce: true) }
            simulator.managementStateChanged()
        }
    }

    /// A client left the bus: its discovery session and filter go (the scan may stop).
    func clientLeft(_ client: String, in simulator: isolated BlueZSimulator) {
        if sessions.remove(client) { discoveryStopped(in: simulator) }
    }
}
