import Bluetooth
import DBus
import EventLoop

#if canImport(Glibc)
    import Glibc
#endif

/// The GATT procedures of a remote characteristic as bluetoothd 5.66's client runs them
/// (docs/bluez.md §4): reads, writes, notify sessions, acquired sockets, and the peripheral's side
/// (what it returns, what it stores). A characteristic of a linked adapter (``target``) forwards
/// to the application behind it (BlueZSimulator+Link.swift).
extension SimulatedCharacteristic {
    /// Reads `offset` (q) and `type` (s) from GATT method options; other keys are ignored.
    static func options(_ value: DBusValue) throws -> (offset: UInt16, type: String?) {
        var offset: UInt16 = 0
        var type: String?
        for entry in value.entries ?? [] {
            guard case .variant(let inner) = entry.value else { throw BlueZError.invalidArguments }
            switch entry.key.string {
            case "offset":
                guard case .uint16(let value) = inner else { throw BlueZError.invalidArguments }
                offset = value
            case "type":
                guard case .string(let value) = inner else { throw BlueZError.invalidArguments }
                type = value
            default:
                continue
            }
        }
        return (offset, type)
    }

    /// `Failed "Not connected"` unless the link is up.
    static func requireConnected(_ device: SimulatedDevice) throws {
        guard case .connected = device.link else { throw BlueZError.failed("Not connected") }
    }

    // MARK: ReadValue

    /// `GattCharacteristic1.ReadValue`: after the GATT round trip the cached `Value` is updated and
    /// emitted (immediately, like a notification), then the reply carries the bytes from `offset`.
    /// A read with the same offset in flight is joined; another offset → InProgress "In Progress".
    func read(
        _ call: DBusMessage, _ reply: DBusPendingReply, of device: SimulatedDevice,
        in simulator: isolated BlueZSimulator
    ) {
        do {
            try Self.requireConnected(device)
            let offset = try Self.options(call.arguments[0]).offset
            if let pending = pendingRead {
                guard pending.offset == offset else { throw BlueZError.inProgress }
                pendingRead?.replies.append(reply)
                return
            }
            pendingRead = (offset, [reply])
            if let target { return forwardRead(to: target, offset: offset, of: device, in: simulator) }
            let latency = simulator.timing.gattLatency
            if latency > 0 {
                simulator.after(latency) { self.completeRead(offset, in: simulator) }
            } else {
                completeRead(offset, in: simulator)
            }
        } catch {
            reply.fail(BlueZError.reply(for: error))
        }
    }

    /// The peer answers a read: its value (a generated one advances), or the scenario's error.
    func completeRead(_ offset: UInt16, in simulator: isolated BlueZSimulator) {
        guard pendingRead != nil else { return }
        let result: Result<[UInt8], DBusError>
        if let code = spec.readError {
            result = .failure(BlueZError.att(code))
        } else if !has("read") {
            result = .failure(BlueZError.att(0x02))
        } else {
            if var source = readSource {
                peerValue = source.next()
                readSource = source
            }
            let value = peerValue
            if Int(offset) > value.count {
                result = .failure(BlueZError.att(0x07))
            } else {
                result = .success(Array(value[Int(offset)...]))
            }
        }
        finishRead(result, in: simulator)
    }

    /// Answers the pending read(s) with the peer's answer.
    func finishRead(_ result: Result<[UInt8], DBusError>, in simulator: isolated BlueZSimulator) {
        guard let pending = pendingRead else { return }
        pendingRead = nil
        simulator.counters.reads += 1
        let offset = pending.offset
        switch result {
        case .success(let bytes):
            // A read at an offset patches bluetoothd's cached value there (the signal carries the
            // cache: "hello world" after reading "world" at offset 6; seen in the real-BlueZ lane).
            var cached = bytes
            if offset > 0,
                let old = simulator.current("Value", BlueZSimulator.characteristicInterface, at: path)?.bytes,
                old.count >= Int(offset)
            {
                cached = Array(old[..<Int(offset)]) + bytes
            }
            let path = self.path
            simulator.withBus {
                try $0.setProperties(
                    ["Value": .bytes(cached)], interface: BlueZSimulator.characteristicInterface, at: path)
            }
            for reply in pending.replies { reply.succeed([.bytes(bytes)]) }
        case .failure(let error):
            for reply in pending.replies { reply.fail(error) }
        }
    }

    // MARK: WriteValue

    /// The write procedure for a `type` option or, without one, the flags (reliable-write →
    /// reliable, write → request, write-without-response → command); nil: not supported.
    func writeProcedure(type: String?) -> String? {
        if type == "reliable" || (type == nil && has("reliable-write")) { return "reliable" }
        if type == "request" || (type == nil && has("write")) { return "request" }
        if type == "command" || (type == nil && has("write-without-response")) { return "command" }
        return nil
    }

    /// `GattCharacteristic1.WriteValue`: the procedure follows ``writeProcedure(type:)``.
    /// Commands return at once; requests after the round trip. `Value` is not updated.
    func write(
        _ call: DBusMessage, _ reply: DBusPendingReply, of device: SimulatedDevice,
        in simulator: isolated BlueZSimulator
    ) {
        do {
            try Self.requireConnected(device)
            let bytes = call.arguments[0].bytes ?? []
            let (offset, type) = try Self.options(call.arguments[1])
            if let type, !["request", "command", "reliable"].contains(type) { throw BlueZError.invalidArguments }
            guard acquiredWrite == nil else { throw BlueZError.notPermitted("Write acquired") }
            guard !writePending else { throw BlueZError.inProgress }
            guard let procedure = writeProcedure(type: type) else { throw BlueZError.notSupported }
            if procedure == "command" {
                guard offset == 0 else { throw BlueZError.notSupported }
                guard bytes.count <= Int(simulator.timing.mtu) - 3 else {
                    throw BlueZError.failed("Failed to initiate write")
                }
                reply.succeed()
                if let target {
                    if has("write-without-response") {
                        forwardWrite(bytes, to: target, offset: 0, reply: nil, of: device, in: simulator)
                    }
                    return
                }
                // The peer silently drops a command it does not permit.
                if has("write-without-response") && spec.writeError == nil {
                    receiveCommand(bytes, of: device, in: simulator)
                }
                return
            }
            writePending = true
            let complete = {
                self.writePending = false
                guard case .connected = device.link else { return reply.fail(BlueZError.failed("Not connected")) }
                if let code = self.spec.writeError { return reply.fail(BlueZError.att(code)) }
                guard self.has("write") || self.has("write-without-response") || self.has("reliable-write") else {
                    return reply.fail(BlueZError.att(0x03))
                }
                guard Int(offset) + bytes.count <= 512 else { return reply.fail(BlueZError.att(0x0D)) }
                if let target = self.target {
                    return self.forwardWrite(bytes, to: target, offset: offset, reply: reply, of: device, in: simulator)
                }
                self.peerReceivedWrite(bytes, offset: offset, type: procedure, of: device, in: simulator)
                reply.succeed()
            }
            let latency = simulator.timing.gattLatency
            if SimulatedDevice.airModelled(simulator) {
                device.queueRequest(complete, in: simulator)
            } else if latency > 0 {
                simulator.after(latency, complete)
            } else {
                complete()
            }
        } catch {
            reply.fail(BlueZError.reply(for: error))
        }
    }

    /// A write command reaches the peer: at once, or in a connection event with the link model.
    func receiveCommand(_ bytes: [UInt8], of device: SimulatedDevice, in simulator: isolated BlueZSimulator) {
        if SimulatedDevice.airModelled(simulator) {
            device.queueCommand(bytes, for: self, in: simulator)
        } else {
            peerReceivedWrite(bytes, offset: 0, type: "command", of: device, in: simulator)
        }
    }

    /// The simulated peripheral stores a write: recorded, and reflected where the scenario says
    /// (the target's value changes and, if someone subscribed to it, is notified).
    func peerReceivedWrite(
        _ bytes: [UInt8], offset: UInt16, type: String, of device: SimulatedDevice,
        in simulator: isolated BlueZSimulator
    ) {
        simulator.record(bytes, offset: offset, type: type, uuid: uuid, path: path, of: device)
        var value = peerValue
        if Int(offset) <= value.count {
            value.replaceSubrange(Int(offset)..<min(value.count, Int(offset) + bytes.count), with: bytes)
            peerValue = value
        }
        if let target = spec.reflectWritesTo, let reflected = device.characteristic(uuid: target) {
            reflected.peerValue = bytes
            reflected.readSource = nil
            if reflected.isSubscribed { reflected.deliver(bytes, of: device, in: simulator) }
        }
    }

    // MARK: Descriptors

    func descriptor(at path: DBusObjectPath) throws -> Descriptor {
        guard let descriptor = descriptors.first(where: { $0.path == path }) else {
            throw DBusError(.unknownObject, "No such object path '\(path)'")
        }
        return descriptor
    }

    /// `GattDescriptor1.ReadValue`: the CCCD shows the subscription, others their fixed value.
    func readDescriptor(
        at path: DBusObjectPath, _ call: DBusMessage, _ reply: DBusPendingReply, of device: SimulatedDevice,
        in simulator: isolated BlueZSimulator
    ) {
        do {
            try Self.requireConnected(device)
            let offset = Int(try Self.options(call.arguments[0]).offset)
            let descriptor = try descriptor(at: path)
            if let target = device.mirror?.targets[descriptor.handle] {
                return forwardDescriptor(
                    at: path, to: target, write: nil, offset: UInt16(offset), reply: reply, of: device, in: simulator)
            }
            var value = descriptor.value
            if descriptor.uuid == GATTLayout.cccd {
                let on: UInt8 = isSubscribed ? (has("notify") ? 1 : 2) : 0
                value = [on, 0]
            }
            guard offset <= value.count else { throw BlueZError.att(0x07) }
            let bytes = Array(value[offset...])
            simulator.counters.reads += 1
            simulator.withBus {
                try $0.setProperties(["Value": .bytes(bytes)], interface: BlueZSimulator.descriptorInterface, at: path)
            }
            reply.succeed([.bytes(bytes)])
        } catch {
            reply.fail(BlueZError.reply(for: error))
        }
    }

    /// `GattDescriptor1.WriteValue`: recorded (the CCCD is bluetoothd's: NotPermitted).
    func writeDescriptor(
        at path: DBusObjectPath, _ call: DBusMessage, _ reply: DBusPendingReply, of device: SimulatedDevice,
        in simulator: isolated BlueZSimulator
    ) {
        do {
            try Self.requireConnected(device)
            let offset = try Self.options(call.arguments[1]).offset
            let descriptor = try descriptor(at: path)
            guard descriptor.uuid != GATTLayout.cccd else { throw BlueZError.notPermitted("Write not permitted") }
            let bytes = call.arguments[0].bytes ?? []
            if let target = device.mirror?.targets[descriptor.handle] {
                return forwardDescriptor(
                    at: path, to: target, write: bytes, offset: offset, reply: reply, of: device, in: simulator)
            }
            simulator.record(bytes, offset: offset, type: "descriptor", uuid: descriptor.uuid, path: path, of: device)
            reply.succeed()
        } catch {
            reply.fail(BlueZError.reply(for: error))
        }
    }

    // MARK: Notifications

    /// `StartNotify` from `client`: per caller; success (and armed for reconnection) while
    /// disconnected; a caller whose session waits for reconnection gets InProgress; the first
    /// session sets Notifying=true.
    func startNotify(_ client: String, of device: SimulatedDevice, in simulator: isolated BlueZSimulator) throws {
        guard canNotify else { throw BlueZError.notSupported }
        guard acquiredNotify == nil else { throw BlueZError.notPermitted("Notify acquired") }
        if case .disconnecting = device.link { throw BlueZError.notConnected }
        if notifySessions.contains(client) {
            if case .connected = device.link { return }
            throw BlueZError.inProgress
        }
        notifySessions.append(client)
        if notifySessions.count == 1 {
            simulator.change(
                [("Notifying", .boolean(true))], interface: BlueZSimulator.characteristicInterface, at: path)
            simulator.flushSignals()  // bluetoothd: Notifying=true before the reply (CCCD written first)
            if device.servicesResolved { startNotifyTimer(of: device, in: simulator) }
        }
    }

    /// `StopNotify` from `client`: only its own session (or its acquired socket).
    func stopNotify(_ client: String, in simulator: isolated BlueZSimulator) throws {
        if acquiredNotify?.owner == client {
            release(emit: true, owner: client, in: simulator)
            return
        }
        guard let index = notifySessions.firstIndex(of: client) else {
            throw BlueZError.failed("No notify session started")
        }
        notifySessions.remove(at: index)
        if notifySessions.isEmpty {
            stopNotifyTimer(in: simulator)
            simulator.change(
                [("Notifying", .boolean(false))], interface: BlueZSimulator.characteristicInterface, at: path)
            simulator.flushSignals()  // bluetoothd: Notifying=false before the reply
        }
    }

    /// The CCCD is enabled: the scenario's periodic notifications start (an application
    /// characteristic's StartNotify is called instead).
    func startNotifyTimer(of device: SimulatedDevice, in simulator: isolated BlueZSimulator) {
        if let target { return simulator.enableCCCD(device, target) }
        guard notifyTimer == nil, let interval = spec.notifyInterval, interval > 0 else { return }
        let devicePath = device.path
        let path = self.path
        notifyTimer = simulator.after(interval) {
            guard let device = simulator.devices[devicePath], let characteristic = device.characteristic(at: path)
            else { return }
            characteristic.notifyTimer = nil
            guard case .connected = device.link, characteristic.isSubscribed else { return }
            characteristic.deliver(characteristic.nextNotificationValue(), of: device, in: simulator)
            characteristic.startNotifyTimer(of: device, in: simulator)
        }
    }

    func stopNotifyTimer(in simulator: isolated BlueZSimulator) {
        if let target, let device = mirrorDevice { simulator.disableCCCD(device, target) }
        simulator.cancel(notifyTimer)
        notifyTimer = nil
    }

    /// One ATT notification reaching BlueZ: a datagram on the AcquireNotify socket, or the cached
    /// `Value` replaced and `PropertiesChanged(Value)` emitted at once (even when unchanged).
    /// A value longer than the link's MTU − 3 arrives cut to MTU − 3 bytes, without a word (the
    /// peer's stack sends what fits one notification PDU).
    @discardableResult
    func deliver(_ value: [UInt8], of device: SimulatedDevice, in simulator: isolated BlueZSimulator) -> Bool {
        guard case .connected = device.link, let connection = simulator.connection else { return false }
        let bytes = Array(value.prefix(Int(simulator.timing.mtu) - 3))
        if let acquired = acquiredNotify {
            guard SeqPacketPair.send(bytes, on: acquired.fd) else { return false }
        } else if !notifySessions.isEmpty, device.gattExported {
            let path = self.path
            do {
                try connection.assumeIsolated {
                    try $0.setProperties(
                        ["Value": .bytes(bytes)], interface: BlueZSimulator.characteristicInterface, at: path)
                }
            } catch {
                return false
            }
        } else {
            return false
        }
        simulator.counters.notifications += 1
        return true
    }

    // MARK: AcquireNotify / AcquireWrite

    /// Hands `client` one end of a SOCK_SEQPACKET socket pair and the MTU.
    func acquire(
        _ call: DBusMessage, notify: Bool, of device: SimulatedDevice, in simulator: isolated BlueZSimulator
    ) throws -> [DBusValue] {
        try Self.requireConnected(device)
        guard let client = call.sender else { throw BlueZError.invalidArguments }
        _ = try Self.options(call.arguments[0])
        if notify {
            guard has("notify") else { throw BlueZError.notSupported }
            guard acquiredNotify == nil else { throw BlueZError.notPermitted("Notify acquired") }
            guard notifySessions.isEmpty else { throw BlueZError.inProgress }
        } else {
            guard has("write-without-response") else { throw BlueZError.notSupported }
            guard acquiredWrite == nil else { throw BlueZError.notPermitted("Write acquired") }
        }
        let pair = try SeqPacketPair.make()
        let remote = DBusUnixFD(taking: pair.remote)
        let fd = pair.local
        let devicePath = device.path
        let path = self.path
        let watch = simulator.loop.addWatch(fd: fd, events: .readable) { [simulator] _ in
            simulator.assumeIsolated { simulator in
                guard let device = simulator.devices[devicePath], let characteristic = device.characteristic(at: path)
                else { return }
                characteristic.acquiredSocketReady(fd: fd, notify: notify, of: device, in: simulator)
            }
        }
        let acquired = Acquired(fd: fd, watch: watch, owner: client)
        if notify {
            acquiredNotify = acquired
            simulator.change(
                [("NotifyAcquired", .boolean(true))], interface: BlueZSimulator.characteristicInterface, at: path)
            simulator.flushSignals()  // bluetoothd: NotifyAcquired=true before the reply
            startNotifyTimer(of: device, in: simulator)
        } else {
            acquiredWrite = acquired
            simulator.change(
                [("WriteAcquired", .boolean(true))], interface: BlueZSimulator.characteristicInterface, at: path)
        }
        return [.unixFD(remote), .uint16(simulator.timing.mtu)]
    }

    /// Our end of an acquired socket is readable: write commands arrive, or the client hung up.
    func acquiredSocketReady(
        fd: Int32, notify: Bool, of device: SimulatedDevice, in simulator: isolated BlueZSimulator
    ) {
        let (datagrams, closed) = SeqPacketPair.receiveAll(from: fd)
        if !notify, acquiredWrite?.fd == fd {
            for datagram in datagrams where datagram.count <= Int(simulator.timing.mtu) - 3 {
                receiveCommand(datagram, of: device, in: simulator)
            }
        }
        guard closed else { return }
        if notify, let acquired = acquiredNotify, acquired.fd == fd {
            release(emit: true, owner: acquired.owner, which: .notify, in: simulator)
        } else if !notify, let acquired = acquiredWrite, acquired.fd == fd {
            release(emit: true, owner: acquired.owner, which: .write, in: simulator)
        }
    }

    enum AcquiredKind { case notify, write, both }

    /// Closes our end of acquired sockets (the client sees HUP/EOF) and clears the *Acquired
    /// flags: those of `owner` (any owner when nil), of the `which` kind.
    func release(
        emit: Bool, owner: String? = nil, which: AcquiredKind = .both, in simulator: isolated BlueZSimulator
    ) {
        if which != .write, let acquired = acquiredNotify, owner == nil || acquired.owner == owner {
            close(acquired, in: simulator)
            acquiredNotify = nil
            if notifySessions.isEmpty { stopNotifyTimer(in: simulator) }
            if emit {
                simulator.change(
                    [("NotifyAcquired", .boolean(false))], interface: BlueZSimulator.characteristicInterface, at: path)
            }
        }
        if which != .notify, let acquired = acquiredWrite, owner == nil || acquired.owner == owner {
            close(acquired, in: simulator)
            acquiredWrite = nil
            if emit {
                simulator.change(
                    [("WriteAcquired", .boolean(false))], interface: BlueZSimulator.characteristicInterface, at: path)
            }
        }
    }

    private func close(_ acquired: Acquired, in simulator: isolated BlueZSimulator) {
        simulator.loop.removeWatch(acquired.watch)
        Glibc.close(acquired.fd)
    }

    // MARK: The link and the clients

    /// The link went down: notifications stop, acquired sockets hang up, pending reads fail,
    /// `MTU` vanishes silently.
    func linkDown(exported: Bool, in simulator: isolated BlueZSimulator) {
        stopNotifyTimer(in: simulator)
        release(emit: true, in: simulator)
        if let pending = pendingRead {
            for reply in pending.replies { reply.fail(BlueZError.failed("Not connected")) }
            pendingRead = nil
        }
        writePending = false
        guard exported else { return }
        let path = self.path
        simulator.withBus {
            try $0.setProperty("MTU", to: nil, interface: BlueZSimulator.characteristicInterface, at: path, emit: false)
        }
    }

    /// `client` left the bus: its notify session and acquired sockets go.
    func clientLeft(_ client: String, deviceGATTExported: Bool, in simulator: isolated BlueZSimulator) {
        if let index = notifySessions.firstIndex(of: client) {
            notifySessions.remove(at: index)
            if notifySessions.isEmpty && acquiredNotify == nil {
                stopNotifyTimer(in: simulator)
                if deviceGATTExported {
                    simulator.change(
                        [("Notifying", .boolean(false))], interface: BlueZSimulator.characteristicInterface, at: path)
                }
            }
        }
        if acquiredNotify?.owner == client || acquiredWrite?.owner == client {
            release(emit: true, owner: client, in: simulator)
        }
    }
}
