import Bluetooth
import DBus
import EventLoop

#if canImport(Glibc)
    import Glibc
#endif

extension BlueZSimulator {
    /// Finds a characteristic of a device; `Failed "Not connected"` unless the link is up.
    func connectedCharacteristic(_ devicePath: DBusObjectPath, _ path: DBusObjectPath) throws -> (
        SimulatedDevice, SimulatedCharacteristic
    ) {
        guard let device = devices[devicePath], let characteristic = device.characteristic(at: path) else {
            throw DBusError(.unknownObject, "No such object path '\(path)'")
        }
        guard case .connected = device.link else { throw BlueZError.failed("Not connected") }
        return (device, characteristic)
    }

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

    // MARK: ReadValue

    /// `GattCharacteristic1.ReadValue`: after the GATT round trip the cached `Value` is updated and
    /// emitted (immediately, like a notification), then the reply carries the bytes from `offset`.
    /// A read with the same offset in flight is joined; another offset → InProgress "In Progress".
    func readValue(_ devicePath: DBusObjectPath, _ path: DBusObjectPath, _ call: DBusMessage, _ reply: DBusPendingReply)
    {
        do {
            let (device, characteristic) = try connectedCharacteristic(devicePath, path)
            let offset = try Self.options(call.arguments[0]).offset
            if let pending = characteristic.pendingRead {
                guard pending.offset == offset else { throw BlueZError.inProgress }
                characteristic.pendingRead?.replies.append(reply)
                return
            }
            characteristic.pendingRead = (offset, [reply])
            if let target = characteristic.target { return forwardRead(device, characteristic, target, offset: offset) }
            let complete: @Sendable (isolated BlueZSimulator) -> Void = { simulator in
                simulator.completeRead(device, characteristic, offset)
            }
            if timing.gattLatency > 0 { after(timing.gattLatency, complete) } else { complete(self) }
        } catch {
            reply.fail(error as? DBusError ?? BlueZError.failed("\(error)"))
        }
    }

    func completeRead(_ device: SimulatedDevice, _ characteristic: SimulatedCharacteristic, _ offset: UInt16) {
        guard characteristic.pendingRead != nil else { return }
        let result: Result<[UInt8], DBusError>
        if let code = characteristic.spec.readError {
            result = .failure(BlueZError.att(code))
        } else if !characteristic.has("read") {
            result = .failure(BlueZError.att(0x02))
        } else {
            if var source = characteristic.readSource {
                characteristic.peerValue = source.next()
                characteristic.readSource = source
            }
            let value = characteristic.peerValue
            if Int(offset) > value.count {
                result = .failure(BlueZError.att(0x07))
            } else {
                result = .success(Array(value[Int(offset)...]))
            }
        }
        finishRead(characteristic, result)
    }

    /// Answers the pending read(s) of a characteristic with the peer's answer.
    func finishRead(_ characteristic: SimulatedCharacteristic, _ result: Result<[UInt8], DBusError>) {
        guard let pending = characteristic.pendingRead else { return }
        characteristic.pendingRead = nil
        counters.reads += 1
        let offset = pending.offset
        switch result {
        case .success(let bytes):
            // A read at an offset patches bluetoothd's cached value there (the signal carries the
            // cache: "hello world" after reading "world" at offset 6; seen in the real-BlueZ lane).
            var cached = bytes
            if offset > 0, let old = current("Value", Self.characteristicInterface, at: characteristic.path)?.bytes,
                old.count >= Int(offset)
            {
                cached = Array(old[..<Int(offset)]) + bytes
            }
            withBus {
                try $0.setProperties(
                    ["Value": .bytes(cached)], interface: Self.characteristicInterface, at: characteristic.path)
            }
            for reply in pending.replies { reply.succeed([.bytes(bytes)]) }
        case .failure(let error):
            for reply in pending.replies { reply.fail(error) }
        }
    }

    // MARK: WriteValue

    /// `GattCharacteristic1.WriteValue`: the procedure follows `type` or, without it, the flags
    /// (reliable-write → reliable, write → request, write-without-response → command). Commands
    /// return at once; requests after the round trip. `Value` is not updated.
    func writeValue(
        _ devicePath: DBusObjectPath, _ path: DBusObjectPath, _ call: DBusMessage, _ reply: DBusPendingReply
    ) {
        do {
            let (device, characteristic) = try connectedCharacteristic(devicePath, path)
            let bytes = call.arguments[0].bytes ?? []
            let (offset, type) = try Self.options(call.arguments[1])
            if let type, !["request", "command", "reliable"].contains(type) { throw BlueZError.invalidArguments }
            guard characteristic.acquiredWrite == nil else { throw BlueZError.notPermitted("Write acquired") }
            guard !characteristic.writePending else { throw BlueZError.inProgress }
            let procedure: String
            if type == "reliable" || (type == nil && characteristic.has("reliable-write")) {
                procedure = "reliable"
            } else if type == "request" || (type == nil && characteristic.has("write")) {
                procedure = "request"
            } else if type == "command" || (type == nil && characteristic.has("write-without-response")) {
                procedure = "command"
            } else {
                throw BlueZError.notSupported
            }
            if procedure == "command" {
                guard offset == 0 else { throw BlueZError.notSupported }
                guard bytes.count <= Int(timing.mtu) - 3 else { throw BlueZError.failed("Failed to initiate write") }
                reply.succeed()
                if let target = characteristic.target {
                    if characteristic.has("write-without-response") {
                        forwardWrite(device, characteristic, target, bytes, offset: 0, reply: nil)
                    }
                    return
                }
                // The peer silently drops a command it does not permit.
                if characteristic.has("write-without-response") && characteristic.spec.writeError == nil {
                    peerReceivedWrite(device, characteristic, bytes, offset: 0, type: "command")
                }
                return
            }
            characteristic.writePending = true
            let complete: @Sendable (isolated BlueZSimulator) -> Void = { simulator in
                characteristic.writePending = false
                guard case .connected = device.link else { return reply.fail(BlueZError.failed("Not connected")) }
                if let code = characteristic.spec.writeError { return reply.fail(BlueZError.att(code)) }
                guard
                    characteristic.has("write") || characteristic.has("write-without-response")
                        || characteristic.has("reliable-write")
                else { return reply.fail(BlueZError.att(0x03)) }
                guard Int(offset) + bytes.count <= 512 else { return reply.fail(BlueZError.att(0x0D)) }
                if let target = characteristic.target {
                    return simulator.forwardWrite(device, characteristic, target, bytes, offset: offset, reply: reply)
                }
                simulator.peerReceivedWrite(device, characteristic, bytes, offset: offset, type: procedure)
                reply.succeed()
            }
            if timing.gattLatency > 0 { after(timing.gattLatency, complete) } else { complete(self) }
        } catch {
            reply.fail(error as? DBusError ?? BlueZError.failed("\(error)"))
        }
    }

    /// The simulated peripheral stores a write: recorded, and reflected where the scenario says
    /// (the target's value changes and, if someone subscribed to it, is notified).
    func peerReceivedWrite(
        _ device: SimulatedDevice, _ characteristic: SimulatedCharacteristic, _ bytes: [UInt8], offset: UInt16,
        type: String
    ) {
        counters.writes += 1
        writes.append(
            RecordedWrite(
                adapter: device.adapter.spec.name, device: device.spec.address, uuid: characteristic.uuid,
                path: characteristic.path.rawValue, value: bytes, offset: offset, type: type, time: elapsed))
        var value = characteristic.peerValue
        if Int(offset) <= value.count {
            value.replaceSubrange(Int(offset)..<min(value.count, Int(offset) + bytes.count), with: bytes)
            characteristic.peerValue = value
        }
        if let target = characteristic.spec.reflectWritesTo, let reflected = device.characteristic(uuid: target) {
            reflected.peerValue = bytes
            reflected.readSource = nil
            if reflected.isSubscribed { deliverNotification(device, reflected, bytes) }
        }
    }

    // MARK: Descriptors

    func readDescriptor(
        _ devicePath: DBusObjectPath, _ characteristicPath: DBusObjectPath, _ path: DBusObjectPath, _ call: DBusMessage,
        _ reply: DBusPendingReply
    ) {
        do {
            let (device, characteristic) = try connectedCharacteristic(devicePath, characteristicPath)
            let offset = Int(try Self.options(call.arguments[0]).offset)
            guard let descriptor = characteristic.descriptors.first(where: { $0.path == path }) else {
                throw DBusError(.unknownObject, "No such object path '\(path)'")
            }
            if let target = device.mirror?.targets[descriptor.handle] {
                return forwardDescriptor(device, target, path: path, write: nil, offset: UInt16(offset), reply: reply)
            }
            var value = descriptor.value
            if descriptor.uuid == GATTLayout.cccd {
                let on: UInt8 = characteristic.isSubscribed ? (characteristic.has("notify") ? 1 : 2) : 0
                value = [on, 0]
            }
            guard offset <= value.count else { throw BlueZError.att(0x07) }
            let bytes = Array(value[offset...])
            counters.reads += 1
            withBus { try $0.setProperties(["Value": .bytes(bytes)], interface: Self.descriptorInterface, at: path) }
            reply.succeed([.bytes(bytes)])
        } catch {
            reply.fail(error as? DBusError ?? BlueZError.failed("\(error)"))
        }
    }

    func writeDescriptor(
        _ devicePath: DBusObjectPath, _ characteristicPath: DBusObjectPath, _ path: DBusObjectPath, _ call: DBusMessage,
        _ reply: DBusPendingReply
    ) {
        do {
            let (device, characteristic) = try connectedCharacteristic(devicePath, characteristicPath)
            let offset = try Self.options(call.arguments[1]).offset
            guard let descriptor = characteristic.descriptors.first(where: { $0.path == path }) else {
                throw DBusError(.unknownObject, "No such object path '\(path)'")
            }
            guard descriptor.uuid != GATTLayout.cccd else { throw BlueZError.notPermitted("Write not permitted") }
            if let target = device.mirror?.targets[descriptor.handle] {
                return forwardDescriptor(
                    device, target, path: path, write: call.arguments[0].bytes ?? [], offset: offset, reply: reply)
            }
            counters.writes += 1
            writes.append(
                RecordedWrite(
                    adapter: device.adapter.spec.name, device: device.spec.address, uuid: descriptor.uuid,
                    path: path.rawValue,
                    value: call.arguments[0].bytes ?? [], offset: offset, type: "descriptor", time: elapsed))
            reply.succeed()
        } catch {
            reply.fail(error as? DBusError ?? BlueZError.failed("\(error)"))
        }
    }

    // MARK: Notifications

    /// `StartNotify`: per caller; success (and armed for reconnection) while disconnected; a
    /// caller whose session waits for reconnection gets InProgress; first session → Notifying=true.
    func startNotify(_ devicePath: DBusObjectPath, _ path: DBusObjectPath, _ call: DBusMessage) throws {
        guard let device = devices[devicePath], let characteristic = device.characteristic(at: path),
            let client = call.sender
        else {
            throw DBusError(.unknownObject, "No such object path '\(path)'")
        }
        guard characteristic.canNotify else { throw BlueZError.notSupported }
        guard characteristic.acquiredNotify == nil else { throw BlueZError.notPermitted("Notify acquired") }
        if case .disconnecting = device.link { throw BlueZError.notConnected }
        if characteristic.notifySessions.contains(client) {
            if case .connected = device.link { return }
            throw BlueZError.inProgress
        }
        characteristic.notifySessions.append(client)
        if characteristic.notifySessions.count == 1 {
            change([("Notifying", .boolean(true))], interface: Self.characteristicInterface, at: path)
            flushSignals()  // bluetoothd: Notifying=true before the reply (CCCD written first)
            if device.servicesResolved { startNotifyTimer(device, characteristic) }
        }
    }

    func stopNotify(_ devicePath: DBusObjectPath, _ path: DBusObjectPath, _ call: DBusMessage) throws {
        guard let device = devices[devicePath], let characteristic = device.characteristic(at: path),
            let client = call.sender
        else {
            throw DBusError(.unknownObject, "No such object path '\(path)'")
        }
        if characteristic.acquiredNotify?.owner == client {
            releaseAcquired(characteristic, emit: true, owner: client)
            return
        }
        guard let index = characteristic.notifySessions.firstIndex(of: client) else {
            throw BlueZError.failed("No notify session started")
        }
        characteristic.notifySessions.remove(at: index)
        if characteristic.notifySessions.isEmpty {
            stopNotifyTimer(characteristic)
            change([("Notifying", .boolean(false))], interface: Self.characteristicInterface, at: path)
            flushSignals()  // bluetoothd: Notifying=false before the reply
        }
    }

    func startNotifyTimer(_ device: SimulatedDevice, _ characteristic: SimulatedCharacteristic) {
        if let target = characteristic.target { return enableCCCD(device, target) }
        guard characteristic.notifyTimer == nil, let interval = characteristic.spec.notifyInterval, interval > 0 else {
            return
        }
        let devicePath = device.path
        let path = characteristic.path
        characteristic.notifyTimer = after(interval) { simulator in
            guard let device = simulator.devices[devicePath], let characteristic = device.characteristic(at: path)
            else { return }
            characteristic.notifyTimer = nil
            guard case .connected = device.link, characteristic.isSubscribed else { return }
            simulator.deliverNotification(device, characteristic, characteristic.nextNotificationValue())
            simulator.startNotifyTimer(device, characteristic)
        }
    }

    func stopNotifyTimer(_ characteristic: SimulatedCharacteristic) {
        if let target = characteristic.target, let device = characteristic.mirrorDevice { disableCCCD(device, target) }
        cancel(characteristic.notifyTimer)
        characteristic.notifyTimer = nil
    }

    /// One ATT notification reaching BlueZ: a datagram on the AcquireNotify socket, or the cached
    /// `Value` replaced and `PropertiesChanged(Value)` emitted at once (even when unchanged).
    @discardableResult
    func deliverNotification(_ device: SimulatedDevice, _ characteristic: SimulatedCharacteristic, _ bytes: [UInt8])
        -> Bool
    {
        guard case .connected = device.link, let connection else { return false }
        if let acquired = characteristic.acquiredNotify {
            guard SeqPacketPair.send(bytes, on: acquired.fd) else { return false }
        } else if !characteristic.notifySessions.isEmpty, device.gattExported {
            let path = characteristic.path
            do {
                try connection.assumeIsolated {
                    try $0.setProperties(["Value": .bytes(bytes)], interface: Self.characteristicInterface, at: path)
                }
            } catch {
                return false
            }
        } else {
            return false
        }
        counters.notifications += 1
        return true
    }

    // MARK: AcquireNotify / AcquireWrite

    /// Hands the caller one end of a SOCK_SEQPACKET socket pair and the MTU.
    func acquire(_ devicePath: DBusObjectPath, _ path: DBusObjectPath, _ call: DBusMessage, notify: Bool) throws
        -> [DBusValue]
    {
        let (device, characteristic) = try connectedCharacteristic(devicePath, path)
        guard let client = call.sender else { throw BlueZError.invalidArguments }
        _ = try Self.options(call.arguments[0])
        if notify {
            guard characteristic.has("notify") else { throw BlueZError.notSupported }
            guard characteristic.acquiredNotify == nil else { throw BlueZError.notPermitted("Notify acquired") }
            guard characteristic.notifySessions.isEmpty else { throw BlueZError.inProgress }
        } else {
            guard characteristic.has("write-without-response") else { throw BlueZError.notSupported }
            guard characteristic.acquiredWrite == nil else { throw BlueZError.notPermitted("Write acquired") }
        }
        let pair = try SeqPacketPair.make()
        let remote = DBusUnixFD(taking: pair.remote)
        let fd = pair.local
        let charPath = characteristic.path
        let watch = loop.addWatch(fd: fd, events: .readable) { [self] events in
            self.assumeIsolated { $0.acquiredSocketReady(devicePath, charPath, fd: fd, notify: notify) }
        }
        let acquired = SimulatedCharacteristic.Acquired(fd: fd, watch: watch, owner: client)
        if notify {
            characteristic.acquiredNotify = acquired
            change([("NotifyAcquired", .boolean(true))], interface: Self.characteristicInterface, at: path)
            flushSignals()  // bluetoothd: NotifyAcquired=true before the reply
            startNotifyTimer(device, characteristic)
        } else {
            characteristic.acquiredWrite = acquired
            change([("WriteAcquired", .boolean(true))], interface: Self.characteristicInterface, at: path)
        }
        return [.unixFD(remote), .uint16(timing.mtu)]
    }

    func acquiredSocketReady(_ devicePath: DBusObjectPath, _ path: DBusObjectPath, fd: Int32, notify: Bool) {
        guard let device = devices[devicePath], let characteristic = device.characteristic(at: path) else { return }
        let (datagrams, closed) = SeqPacketPair.receiveAll(from: fd)
        if !notify, characteristic.acquiredWrite?.fd == fd {
            for datagram in datagrams where datagram.count <= Int(timing.mtu) - 3 {
                peerReceivedWrite(device, characteristic, datagram, offset: 0, type: "command")
            }
        }
        if closed {
            if notify, characteristic.acquiredNotify?.fd == fd {
                releaseAcquired(characteristic, emit: true, owner: characteristic.acquiredNotify?.owner, which: .notify)
            } else if !notify, characteristic.acquiredWrite?.fd == fd {
                releaseAcquired(characteristic, emit: true, owner: characteristic.acquiredWrite?.owner, which: .write)
            }
        }
    }

    enum AcquiredKind { case notify, write, both }

    /// Closes our end of acquired sockets (the client sees HUP/EOF) and clears the *Acquired flags.
    func releaseAcquired(
        _ characteristic: SimulatedCharacteristic, emit: Bool, owner: String? = nil, which: AcquiredKind = .both
    ) {
        if which != .write, let acquired = characteristic.acquiredNotify, owner == nil || acquired.owner == owner {
            loop.removeWatch(acquired.watch)
            close(acquired.fd)
            characteristic.acquiredNotify = nil
            if characteristic.notifySessions.isEmpty { stopNotifyTimer(characteristic) }
            if emit {
                change(
                    [("NotifyAcquired", .boolean(false))], interface: Self.characteristicInterface,
                    at: characteristic.path)
            }
        }
        if which != .notify, let acquired = characteristic.acquiredWrite, owner == nil || acquired.owner == owner {
            loop.removeWatch(acquired.watch)
            close(acquired.fd)
            characteristic.acquiredWrite = nil
            if emit {
                change(
                    [("WriteAcquired", .boolean(false))], interface: Self.characteristicInterface,
                    at: characteristic.path)
            }
        }
    }
}
