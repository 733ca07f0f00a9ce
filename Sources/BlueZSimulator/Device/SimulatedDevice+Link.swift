import Bluetooth
import BluetoothManagement
import DBus
import EventLoop

/// The device's link and pairing as bluetoothd 5.66 runs them (docs/bluez.md §4): the decisions
/// are the device's own (``connectPlan()``, ``pairingRefusal()``), the methods taking the
/// simulator carry them out on the bus (replies, signals, timers).
extension SimulatedDevice {
    /// What a `Connect()` does, decided from the device's state alone.
    enum ConnectPlan: Equatable {
        /// Answer at once: success (connected already) or this error.
        case answer(DBusError?)
        /// The link comes up after this many seconds.
        case linkUp(after: Double)
        /// The attempt fails ("le-connection-abort-by-local") after this many seconds.
        case fail(after: Double)
    }

    /// `Device1.Connect()` (LE, 5.66): adapter off → NotReady; connected → success; pending →
    /// Failed "Operation already in progress"; otherwise a public or static random device
    /// becomes permanent, and the link comes up after the connect delay. Fault knobs: the first
    /// N attempts fail after the connect delay; an unreachable device, or one that does not
    /// advertise connectably, fails after the create-connection timeout — the latter comes up
    /// after all if it advertises connectably meanwhile (``connectAwaitsAdvertisement``).
    func connectPlan() -> ConnectPlan {
        guard adapter.powered else { return .answer(BlueZError.notReady) }
        switch link {
        case .connected: return .answer(nil)
        case .connecting, .disconnecting: return .answer(BlueZError.failed("Operation already in progress"))
        case .disconnected: break
        }
        if spec.addressType == .public || spec.address.isStaticRandom { temporary = false }
        let faults = spec.faults
        connectAwaitsAdvertisement = !faults.unreachable && !spec.connectable
        if faults.unreachable || !spec.connectable { return .fail(after: faults.connectTimeout) }
        if remainingConnectFailures > 0 {
            remainingConnectFailures -= 1
            return .fail(after: faults.connectDelay)
        }
        return .linkUp(after: faults.connectDelay)
    }

    func connect(_ reply: DBusPendingReply, in simulator: isolated BlueZSimulator) {
        simulator.counters.connectCalls += 1
        let plan = connectPlan()
        if !temporary { stopTemporaryTimer(in: simulator) }
        let path = self.path
        switch plan {
        case .answer(let error?): reply.fail(error)
        case .answer(nil): reply.succeed()
        case .fail(let delay):
            link = .connecting(
                reply: reply, timer: simulator.after(delay) { simulator.devices[path]?.connectFailed(in: simulator) })
        case .linkUp(let delay):
            link = .connecting(
                reply: reply, timer: simulator.after(delay) { simulator.devices[path]?.linkUp(in: simulator) })
        }
    }

    /// The device now advertises connectably: a Connect() waiting for that comes up after the connect delay.
    func connectableAgain(in simulator: isolated BlueZSimulator) {
        guard connectAwaitsAdvertisement, spec.connectable, case .connecting(let reply, let timer) = link else {
            return
        }
        connectAwaitsAdvertisement = false
        simulator.cancel(timer)
        let path = self.path
        link = .connecting(
            reply: reply,
            timer: simulator.after(spec.faults.connectDelay) { simulator.devices[path]?.linkUp(in: simulator) })
    }

    func connectFailed(in simulator: isolated BlueZSimulator) {
        guard case .connecting(let reply, _) = link else { return }
        link = .disconnected
        simulator.counters.connectFailures += 1
        reply.fail(BlueZError.failed("le-connection-abort-by-local"))
        if temporary { armTemporaryTimer(in: simulator) }
    }

    /// Ends a pending Connect() with `error` (Disconnect, RemoveDevice, power-off, the peer);
    /// false when none was pending.
    @discardableResult
    func abortConnect(_ error: DBusError, in simulator: isolated BlueZSimulator) -> Bool {
        guard case .connecting(let reply, let timer) = link else { return false }
        simulator.cancel(timer)
        link = .disconnected
        reply.fail(error)
        return true
    }

    func linkUp(in simulator: isolated BlueZSimulator) {
        guard case .connecting(let reply, _) = link else { return }
        link = .connected
        let parameters = simulator.linkParameters(adapter, spec.address)
        linkParameters = parameters
        simulator.log?("simulator: \(spec.address) linked on \(adapter.spec.name): \(parameters)")
        simulator.counters.connects += 1
        if mirror != nil { mirrorLinkUp(in: simulator) }
        simulator.change([("Connected", .boolean(true))], interface: BlueZSimulator.deviceInterface, at: path)
        // MTU exchange: cached characteristics gain MTU now, silently (bluetoothd 5.66 emits no
        // PropertiesChanged for it on a reconnection; seen in the real-BlueZ lane).
        let timing = simulator.timing
        if gattExported, timing.mtuProperty {
            let mtu = DBusValue.uint16(timing.mtu)
            for characteristic in characteristics {
                let path = characteristic.path
                simulator.withBus {
                    try $0.setProperty(
                        "MTU", to: mtu, interface: BlueZSimulator.characteristicInterface, at: path, emit: false)
                }
            }
        }
        simulator.flushSignals()  // Connected=true goes out just before the reply, as in bluetoothd
        reply.succeed()
        let path = self.path
        resolveTimer = simulator.after(timing.resolveDelay) { simulator.devices[path]?.servicesResolved(in: simulator) }
        if let drop = spec.faults.linkDropAfter {
            linkTimer = simulator.after(drop) {
                simulator.devices[path]?.linkTimer = nil
                simulator.devices[path]?.peerDisconnect(.timeout, in: simulator)
            }
        }
    }

    func servicesResolved(in simulator: isolated BlueZSimulator) {
        guard case .connected = link else { return }
        resolveTimer = nil
        simulator.exportGATT(self)
        var changes: [(String, DBusValue?)] = []
        if !resolvedOnce {
            resolvedOnce = true
            changes.append(("UUIDs", .strings(uuidsValue)))
        }
        servicesResolved = true
        changes.append(("ServicesResolved", .boolean(true)))
        simulator.change(changes, interface: BlueZSimulator.deviceInterface, at: path)
        // Notify sessions outlive the link: re-armed now (the CCCD is written again).
        for characteristic in characteristics where characteristic.isSubscribed {
            characteristic.startNotifyTimer(of: self, in: simulator)
        }
    }

    /// `Device1.Disconnect()`: success when not connected; cancels a pending Connect (which gets
    /// Failed "br-connection-canceled"); otherwise the link drops after BlueZ's disconnect timer
    /// (`disconnect_delay`, 2 s), the reply goes out, then `{ServicesResolved:false, Connected:false}`.
    /// `done` runs once the link is down.
    func disconnect(
        _ reply: DBusPendingReply?, in simulator: isolated BlueZSimulator,
        then done: (() -> Void)? = nil
    ) {
        let path = self.path
        let drop = {
            guard let device = simulator.devices[path] else { return }
            device.linkDown(in: simulator)
            done?()
        }
        switch link {
        case .disconnected:
            reply?.succeed()
            done?()
        case .connecting:
            abortConnect(BlueZError.failed("br-connection-canceled"), in: simulator)
            reply?.succeed()
            done?()
        case .connected:
            let timer = simulator.after(simulator.timing.disconnectDelay, drop)
            link = .disconnecting(replies: reply.map { [$0] } ?? [], timer: timer)
        case .disconnecting(let replies, var timer):
            if done != nil {
                // Chain after the running timer.
                simulator.cancel(timer)
                timer = simulator.after(simulator.timing.disconnectDelay, drop)
            }
            link = .disconnecting(replies: replies + (reply.map { [$0] } ?? []), timer: timer)
        }
    }

    /// The peer (or the radio) drops the link now: `.timeout` when the device went silent or out
    /// of range, `.remote` when it ended the link itself.
    func peerDisconnect(_ reason: DisconnectReason, in simulator: isolated BlueZSimulator) {
        switch link {
        case .connecting:
            abortConnect(BlueZError.failed("le-connection-abort-by-local"), in: simulator)
        case .connected, .disconnecting:
            linkDown(reason: reason, in: simulator)
        case .disconnected:
            break
        }
    }

    /// The link is down. After our Disconnect(): `ServicesResolved=false`, the waiting callers'
    /// replies, then `Connected=false` (two signals, as bluetoothd 5.66 in the real-BlueZ lane);
    /// a drop by the peer or a power-off: one signal `{ServicesResolved:false, Connected:false}`.
    /// MTU vanishes silently; acquired sockets hang up; objects stay exported (GATT cache); a
    /// temporary device starts its removal countdown. The kernel's Device Disconnected (with
    /// `reason`, or "local host" after our Disconnect()) goes to the management socket first, as
    /// the kernel sends it before bluetoothd hears of it.
    func linkDown(reason: DisconnectReason = .localHost, in simulator: isolated BlueZSimulator) {
        let interface = BlueZSimulator.deviceInterface
        var requested = false
        if case .disconnecting = link { requested = true }
        simulator.managementDisconnected(self, reason: requested ? .localHost : reason)
        if case .disconnecting(let replies, let timer) = link {
            simulator.cancel(timer)
            simulator.change([("ServicesResolved", .boolean(false))], interface: interface, at: path)
            simulator.flushSignals()
            for reply in replies { reply.succeed() }
        }
        link = .disconnected
        simulator.counters.disconnects += 1
        simulator.cancel(linkTimer)
        simulator.cancel(resolveTimer)
        linkTimer = nil
        resolveTimer = nil
        servicesResolved = false
        let path = self.path
        // After the replies (queued on the loop before this), as bluetoothd orders them.
        if requested {
            // The property is false now; its signal follows the replies (which leave through the
            // connection's own queue, so a loop turn is not enough: a short timer).
            simulator.withBus {
                try $0.setProperty("Connected", to: .boolean(false), interface: interface, at: path, emit: false)
            }
            _ = simulator.after(0.002) {
                guard let device = simulator.devices[path], case .disconnected = device.link else { return }
                simulator.change([("Connected", .boolean(false))], interface: interface, at: path)
            }
        } else {
            simulator.change(
                [("ServicesResolved", .boolean(false)), ("Connected", .boolean(false))], interface: interface, at: path)
        }
        for characteristic in characteristics { characteristic.linkDown(exported: gattExported, in: simulator) }
        airLinkDown(in: simulator)
        simulator.bursts.removeAll { $0.device == path }
        endPairing(BlueZError.authenticationCanceled, in: simulator)
        if temporary { armTemporaryTimer(in: simulator) }
        linkedLinkDown(in: simulator)
    }

    // MARK: Pairing

    /// How long LE pairing takes (the SMP exchange; not a measurement of the VM).
    static let pairingDelay = 0.1

    /// Why `Pair()` is refused at once, if it is, in bluetoothd 5.66's order: adapter off →
    /// `NotReady`; a Pair() running → `InProgress` "In Progress"; paired already →
    /// `AlreadyExists`; not connected → `ConnectionAttemptFailed` "Page Timeout" (bluetoothd
    /// would connect first: a known difference, the simulator pairs connected devices only).
    func pairingRefusal() -> DBusError? {
        guard adapter.powered else { return BlueZError.notReady }
        guard pairing == nil else { return BlueZError.inProgress }
        guard !paired else { return BlueZError.alreadyExists }
        guard case .connected = link else { return BlueZError.connectionAttemptFailed }
        return nil
    }

    /// The SMP exchange ended: with a Just Works peer the device is paired and bonded (and no
    /// longer temporary); a peer that rejects gives `AuthenticationFailed`.
    func pairingCompleted() -> DBusError? {
        guard spec.pairing == .justWorks else { return BlueZError.authenticationFailed }
        paired = true
        temporary = false
        return nil
    }

    /// `Device1.Pair()` as bluetoothd 5.66 answers it (`pair_device`, `device_bonding_complete`):
    /// Just Works (and a refusing peer) after ``pairingDelay``; a peer that demands passkey entry
    /// or numeric comparison through the caller's agent (else the default agent, the first
    /// registered: agent.c `agent_get`), SimulatedDevice+Agent.swift. Paired: `{Bonded: true,
    /// Paired: true}`, then the reply; the link dropping meanwhile: `AuthenticationCanceled`.
    func pair(_ reply: DBusPendingReply, caller: String?, in simulator: isolated BlueZSimulator) {
        if let refusal = pairingRefusal() { return reply.fail(refusal) }
        pairingAttempt += 1
        switch spec.pairing {
        case .justWorks, .reject:
            let path = self.path
            let timer = simulator.after(Self.pairingDelay) {
                guard let device = simulator.devices[path], let pending = device.pairing else { return }
                device.pairing = nil
                if let error = device.pairingCompleted() { return pending.reply.fail(error) }
                device.bonded(pending.reply, in: simulator)
            }
            pairing = (reply, timer)
        case .passkeyEntry, .numericComparison:
            pairing = (reply, nil)
            askAgent(caller: caller, in: simulator)
        }
    }

    /// Paired and bonded: the properties, then the reply.
    func bonded(_ reply: DBusPendingReply, in simulator: isolated BlueZSimulator) {
        paired = true
        temporary = false
        stopTemporaryTimer(in: simulator)
        simulator.change(
            [("Bonded", .boolean(true)), ("Paired", .boolean(true))], interface: BlueZSimulator.deviceInterface,
            at: path)
        simulator.flushSignals()  // the properties go out before the reply, as in bluetoothd
        reply.succeed()
    }

    /// `Device1.CancelPairing()`: the running Pair() fails `AuthenticationCanceled`; none
    /// running: `DoesNotExist`.
    func cancelPairing(in simulator: isolated BlueZSimulator) throws {
        guard pairing != nil else { throw BlueZError.doesNotExist }
        endPairing(BlueZError.authenticationCanceled, in: simulator)
    }

    /// Fails a Pair() still running with `error`; an agent still asked is told `Cancel`.
    func endPairing(_ error: DBusError, in simulator: isolated BlueZSimulator) {
        guard let pending = pairing else { return }
        pairing = nil
        simulator.cancel(pending.timer)
        if let agent = pairingAgent {
            pairingAgent = nil
            simulator.withBus {
                try $0.send(destination: agent.owner, path: agent.path, interface: "org.bluez.Agent1", method: "Cancel")
            }
        }
        pending.reply.fail(error)
    }

    // MARK: On the bus and off it

    /// Exports `Device1` (the device was seen in a scan, or connected).
    func export(in simulator: isolated BlueZSimulator) {
        guard !exported else { return }
        exported = true
        let interface = simulator.deviceInterface(self)
        let path = self.path
        simulator.withBus { try $0.export([interface], at: path) }
    }

    /// Removes Device1 and its GATT objects (InterfacesRemoved) and forgets what bluetoothd
    /// knew: the cache, the alias, the pairing (keys, bond); the device may be found again.
    func unexport(in simulator: isolated BlueZSimulator) {
        guard exported else { return }
        stopTemporaryTimer(in: simulator)
        simulator.unexport(under: path, including: true)
        exported = false
        gattExported = false
        endPairing(BlueZError.authenticationCanceled, in: simulator)
        paired = false
        cache = AdvertisementCache()
        alias = nil
        temporary = true
        resolvedOnce = false
        servicesResolved = false
        for characteristic in characteristics {
            characteristic.notifySessions.removeAll()
            characteristic.stopNotifyTimer(in: simulator)
        }
    }

    /// Restarts the 30 s (TemporaryTimeout) countdown to removal.
    func armTemporaryTimer(in simulator: isolated BlueZSimulator) {
        simulator.cancel(temporaryTimer)
        let path = self.path
        temporaryTimer = simulator.after(simulator.timing.temporaryTimeout) {
            guard let device = simulator.devices[path] else { return }
            device.temporaryTimer = nil
            guard device.temporary, case .disconnected = device.link else { return }
            device.unexport(in: simulator)
        }
    }

    func stopTemporaryTimer(in simulator: isolated BlueZSimulator) {
        simulator.cancel(temporaryTimer)
        temporaryTimer = nil
    }

    /// Discovery ended on the adapter: RSSI and TxPower are invalidated; a temporary device last
    /// seen non-connectable (and not connected) is removed at once.
    func discoveryStopped(in simulator: isolated BlueZSimulator) {
        guard exported else { return }
        simulator.change(
            propertyChanges(cache.discoveryStopped()), interface: BlueZSimulator.deviceInterface, at: path)
        if temporary && !lastReportConnectable && !isConnected { unexport(in: simulator) }
    }

    /// One advertising report through bluetoothd's pipeline: the device appears with its first
    /// report that passes the scan's filter; later ones signal what they changed.
    func report(in simulator: isolated BlueZSimulator) {
        let report = makeReport()
        simulator.counters.advertisementReports += 1
        simulator.managementDeviceFound(self, report)
        // A monitor's passive scan reaches the kernel's sockets only: bluetoothd (without its
        // experimental monitor manager) ignores Advertisement Monitor Device Found.
        guard adapter.sessions.isDiscovering else { return }
        guard let changed = receive(report, filter: adapter.sessions.merged) else { return }
        if !exported {
            export(in: simulator)
        } else {
            simulator.change(propertyChanges(changed), interface: BlueZSimulator.deviceInterface, at: path)
        }
        if temporary { armTemporaryTimer(in: simulator) }
    }

    /// A client left the bus: its notify sessions and acquired sockets go.
    func clientLeft(_ client: String, in simulator: isolated BlueZSimulator) {
        for characteristic in characteristics {
            characteristic.clientLeft(client, deviceGATTExported: gattExported, in: simulator)
        }
    }
}
