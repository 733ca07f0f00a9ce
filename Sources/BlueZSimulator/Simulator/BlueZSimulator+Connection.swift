import Bluetooth
import DBus
import EventLoop

extension BlueZSimulator {
    /// `Device1.Connect()` (LE, 5.66): already connected → success; pending → Failed "Operation
    /// already in progress"; otherwise the device becomes permanent, the link comes up after the
    /// device's connect delay (Connected=true, then the reply), and services resolve after
    /// `resolve_delay`. Fault knobs: the first N attempts fail, an unreachable device fails after
    /// the create-connection timeout — both with Failed "le-connection-abort-by-local". A device not
    /// advertising connectably fails after that timeout too, unless it starts to meanwhile (a
    /// linked adapter registering its advertisement again): then the link comes up after the
    /// connect delay, as the kernel's create-connection does at the next advertisement.
    func connect(_ path: DBusObjectPath, _ reply: DBusPendingReply) {
        guard let device = devices[path], device.exported else {
            return reply.fail(DBusError(.unknownObject, "No such object path '\(path)'"))
        }
        counters.connectCalls += 1
        guard device.adapter.powered else { return reply.fail(BlueZError.notReady) }
        switch device.link {
        case .connected:
            return reply.succeed()
        case .connecting, .disconnecting:
            return reply.fail(BlueZError.failed("Operation already in progress"))
        case .disconnected:
            break
        }
        if device.spec.addressType == .public || device.spec.address.isStaticRandom {
            device.temporary = false
            cancel(device.temporaryTimer)
            device.temporaryTimer = nil
        }
        let faults = device.spec.faults
        let timer: EventLoop.Token
        device.connectAwaitsAdvertisement = !faults.unreachable && !device.spec.connectable
        if faults.unreachable || !device.spec.connectable {
            timer = after(faults.connectTimeout) { $0.connectFailed(path) }
        } else if device.remainingConnectFailures > 0 {
            device.remainingConnectFailures -= 1
            timer = after(faults.connectDelay) { $0.connectFailed(path) }
        } else {
            timer = after(faults.connectDelay) { $0.linkUp(path) }
        }
        device.link = .connecting(reply: reply, timer: timer)
    }

    /// `device` now advertises connectably: a Connect() waiting for that comes up after the connect delay.
    func connectableAgain(_ device: SimulatedDevice) {
        guard device.connectAwaitsAdvertisement, device.spec.connectable,
            case .connecting(let reply, let timer) = device.link
        else { return }
        device.connectAwaitsAdvertisement = false
        cancel(timer)
        let path = device.path
        device.link = .connecting(reply: reply, timer: after(device.spec.faults.connectDelay) { $0.linkUp(path) })
    }

    func connectFailed(_ path: DBusObjectPath) {
        guard let device = devices[path], case .connecting(let reply, _) = device.link else { return }
        device.link = .disconnected
        counters.connectFailures += 1
        reply.fail(BlueZError.failed("le-connection-abort-by-local"))
        if device.temporary { armTemporaryTimer(device) }
    }

    func linkUp(_ path: DBusObjectPath) {
        guard let device = devices[path], case .connecting(let reply, _) = device.link else { return }
        device.link = .connected
        counters.connects += 1
        if device.mirror != nil { mirrorLinkUp(device) }
        change([("Connected", .boolean(true))], interface: Self.deviceInterface, at: path)
        // MTU exchange: cached characteristics gain MTU now, silently (bluetoothd 5.66 emits no
        // PropertiesChanged for it on a reconnection; seen in the real-BlueZ lane).
        if device.gattExported, timing.mtuProperty {
            let mtu = DBusValue.uint16(timing.mtu)
            for characteristic in device.characteristics {
                withBus {
                    try $0.setProperty(
                        "MTU", to: mtu, interface: Self.characteristicInterface, at: characteristic.path, emit: false)
                }
            }
        }
        flushSignals()  // Connected=true goes out just before the reply, as in bluetoothd
        reply.succeed()
        device.resolveTimer = after(timing.resolveDelay) { $0.servicesResolved(path) }
        if let drop = device.spec.faults.linkDropAfter {
            device.linkTimer = after(drop) { simulator in
                simulator.devices[path]?.linkTimer = nil
                simulator.peerDisconnect(path)
            }
        }
    }

    func servicesResolved(_ path: DBusObjectPath) {
        guard let device = devices[path], case .connected = device.link else { return }
        device.resolveTimer = nil
        exportGATT(device)
        var changes: [(String, DBusValue?)] = []
        if !device.resolvedOnce {
            device.resolvedOnce = true
            changes.append(("UUIDs", .strings(device.uuidsValue)))
        }
        device.servicesResolved = true
        changes.append(("ServicesResolved", .boolean(true)))
        change(changes, interface: Self.deviceInterface, at: path)
        // Notify sessions outlive the link: re-armed now (the CCCD is written again).
        for characteristic in device.characteristics where characteristic.isSubscribed {
            startNotifyTimer(device, characteristic)
        }
    }

    /// `Device1.Disconnect()`: success when not connected; cancels a pending Connect (which gets
    /// Failed "br-connection-canceled"); otherwise the link drops after BlueZ's disconnect timer
    /// (`disconnect_delay`, 2 s), the reply goes out, then `{ServicesResolved:false, Connected:false}`.
    func disconnect(
        _ path: DBusObjectPath, _ reply: DBusPendingReply?,
        then done: (@Sendable (isolated BlueZSimulator) -> Void)? = nil
    ) {
        guard let device = devices[path] else {
            reply?.succeed()
            return
        }
        switch device.link {
        case .disconnected:
            reply?.succeed()
            done?(self)
        case .connecting(let pending, let timer):
            cancel(timer)
            device.link = .disconnected
            pending.fail(BlueZError.failed("br-connection-canceled"))
            reply?.succeed()
            done?(self)
        case .connected:
            let timer = after(timing.disconnectDelay) { simulator in
                guard let device = simulator.devices[path] else { return }
                simulator.linkDown(device)
                done?(simulator)
            }
            device.link = .disconnecting(replies: reply.map { [$0] } ?? [], timer: timer)
        case .disconnecting(let replies, let timer):
            if let done {
                // Chain after the running timer.
                cancel(timer)
                let chained = after(timing.disconnectDelay) { simulator in
                    guard let device = simulator.devices[path] else { return }
                    simulator.linkDown(device)
                    done(simulator)
                }
                device.link = .disconnecting(replies: replies + (reply.map { [$0] } ?? []), timer: chained)
            } else {
                device.link = .disconnecting(replies: replies + (reply.map { [$0] } ?? []), timer: timer)
            }
        }
    }

    /// The peer (or the radio) drops the link now.
    func peerDisconnect(_ path: DBusObjectPath) {
        guard let device = devices[path] else { return }
        switch device.link {
        case .connecting(let reply, let timer):
            cancel(timer)
            device.link = .disconnected
            reply.fail(BlueZError.failed("le-connection-abort-by-local"))
        case .connected, .disconnecting:
            linkDown(device)
        case .disconnected:
            break
        }
    }

    /// The link is down. After our Disconnect(): `ServicesResolved=false`, the waiting callers'
    /// replies, then `Connected=false` (two signals, as bluetoothd 5.66 in the real-BlueZ lane);
    /// a drop by the peer or a power-off: one signal `{ServicesResolved:false, Connected:false}`.
    /// MTU vanishes silently; acquired sockets hang up; objects stay exported (GATT cache); a
    /// temporary device starts its removal countdown.
    func linkDown(_ device: SimulatedDevice) {
        var requested = false
        if case .disconnecting(let replies, let timer) = device.link {
            cancel(timer)
            requested = true
            change([("ServicesResolved", .boolean(false))], interface: Self.deviceInterface, at: device.path)
            flushSignals()
            for reply in replies { reply.succeed() }
        }
        device.link = .disconnected
        counters.disconnects += 1
        cancel(device.linkTimer)
        cancel(device.resolveTimer)
        device.linkTimer = nil
        device.resolveTimer = nil
        device.servicesResolved = false
        let path = device.path
        // After the replies (queued on the loop before this), as bluetoothd orders them.
        if requested {
            // The property is false now; its signal follows the replies (which leave through the
            // connection's own queue, so a loop turn is not enough: a short timer).
            withBus {
                try $0.setProperty(
                    "Connected", to: .boolean(false), interface: Self.deviceInterface, at: path, emit: false)
            }
            _ = after(0.002) { simulator in
                guard let device = simulator.devices[path], case .disconnected = device.link else { return }
                simulator.change([("Connected", .boolean(false))], interface: Self.deviceInterface, at: path)
            }
        } else {
            change(
                [("ServicesResolved", .boolean(false)), ("Connected", .boolean(false))],
                interface: Self.deviceInterface, at: path)
        }
        for characteristic in device.characteristics {
            stopNotifyTimer(characteristic)
            releaseAcquired(characteristic, emit: true)
            if let pending = characteristic.pendingRead {
                for reply in pending.replies { reply.fail(BlueZError.failed("Not connected")) }
                characteristic.pendingRead = nil
            }
            characteristic.writePending = false
            if device.gattExported {
                withBus {
                    try $0.setProperty(
                        "MTU", to: nil, interface: Self.characteristicInterface, at: characteristic.path, emit: false)
                }
            }
        }
        bursts.removeAll { $0.device == path }
        endPairing(device, BlueZError.authenticationCanceled)
        if device.temporary { armTemporaryTimer(device) }
        linkedLinkDown(device)
    }

    // MARK: Pairing

    /// How long LE pairing takes (the SMP exchange; not a measurement of the VM).
    static let pairingDelay = 0.1

    /// `Device1.Pair()` as bluetoothd 5.66 answers it for LE Just Works pairing without an agent
    /// (`pair_device`, `device_bonding_complete`): on a connected device, after
    /// ``pairingDelay``, `{Bonded: true, Paired: true}`, then the reply; the device is no longer
    /// temporary. A peer with `"pairing": "reject"`: `AuthenticationFailed` "Authentication
    /// Failed". Paired already: `AlreadyExists` "Already Exists"; a Pair() running:
    /// `InProgress` "In Progress"; the link dropping meanwhile: `AuthenticationCanceled`. Not
    /// connected: `ConnectionAttemptFailed` "Page Timeout" at once — bluetoothd would connect
    /// first (a known difference: the simulator pairs connected devices only).
    func pair(_ path: DBusObjectPath, _ reply: DBusPendingReply) {
        guard let device = devices[path], device.exported else {
            return reply.fail(DBusError(.unknownObject, "No such object path '\(path)'"))
        }
        guard device.adapter.powered else { return reply.fail(BlueZError.notReady) }
        guard device.pairing == nil else { return reply.fail(BlueZError.inProgress) }
        guard !device.paired else { return reply.fail(BlueZError.alreadyExists) }
        guard case .connected = device.link else { return reply.fail(BlueZError.connectionAttemptFailed) }
        let timer = after(Self.pairingDelay) { simulator in
            guard let device = simulator.devices[path], let pending = device.pairing else { return }
            device.pairing = nil
            guard device.spec.pairing == .justWorks else { return pending.reply.fail(BlueZError.authenticationFailed) }
            device.paired = true
            device.temporary = false
            simulator.cancel(device.temporaryTimer)
            device.temporaryTimer = nil
            simulator.change(
                [("Bonded", .boolean(true)), ("Paired", .boolean(true))], interface: Self.deviceInterface, at: path)
            simulator.flushSignals()  // the properties go out before the reply, as in bluetoothd
            pending.reply.succeed()
        }
        device.pairing = (reply, timer)
    }

    /// `Device1.CancelPairing()`: the running Pair() fails `AuthenticationCanceled`; none
    /// running: `DoesNotExist`.
    func cancelPairing(_ path: DBusObjectPath) throws {
        guard let device = devices[path], device.pairing != nil else { throw BlueZError.doesNotExist }
        endPairing(device, BlueZError.authenticationCanceled)
    }

    /// Fails a Pair() still running with `error`.
    func endPairing(_ device: SimulatedDevice, _ error: DBusError) {
        guard let pending = device.pairing else { return }
        device.pairing = nil
        cancel(pending.timer)
        pending.reply.fail(error)
    }
}
