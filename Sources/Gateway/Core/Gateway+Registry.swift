import Bluetooth
import JSON

extension Gateway {
    /// Whether the device may be forgotten when silent: advertisement-only, not named by a rule
    /// with exactly one address, and not busy (idle link, no command queued or running).
    func isForgettable(_ index: Int) -> Bool {
        let rule = rule(index)
        let address = devices[index].address
        return !rule.connect && rule.match.addresses.count != 1 && devices[index].link == .idle
            && (queues[address] ?? []).isEmpty && !draining.contains(address) && connectWaiters[address] == nil
    }

    /// When a forgettable device will be forgotten if nothing arrives.
    func forgetDeadline(_ index: Int) -> Double? {
        isForgettable(index) ? devices[index].lastActivity + config.bluetooth.forgetAfter : nil
    }

    /// Forgets advertisement-only devices silent for `bluetooth.forget_after`.
    func forgetSilentDevices(now: Double) {
        for index in devices.indices.reversed() {
            if let deadline = forgetDeadline(index), now >= deadline {
                log(.info, "\(devices[index].name) (\(devices[index].address)): forgotten after \(config.bluetooth.forgetAfter)s without an advertisement")
                removeDevice(index)
            }
        }
    }

    /// Makes room for one more device when the registry is full: the longest-silent forgettable
    /// device goes. False (counted as a drop) when the registry is full of devices that stay.
    func makeRoomForDevice() -> Bool {
        guard devices.count >= config.bluetooth.maxDevices else { return true }
        var oldest: Int?
        for index in devices.indices where isForgettable(index) {
            if oldest.map({ devices[index].lastActivity < devices[$0].lastActivity }) ?? true { oldest = index }
        }
        counters.dropped.registryFull += 1
        guard let oldest else { return false }
        log(.info, "\(devices[oldest].name): forgotten to make room (bluetooth.max_devices \(config.bluetooth.maxDevices))")
        removeDevice(oldest)
        return true
    }

    /// Removes a device: its link ends, its Home Assistant configs, retained availability and
    /// retained state are cleared (empty retained payloads), `bridge/event` says
    /// `device_removed` and `bridge/devices` is republished. A device that advertises again
    /// is registered again. Callers make sure no command of the device is running (indices
    /// shift).
    func removeDevice(_ index: Int) {
        let address = devices[index].address
        for task in devices[index].notificationTasks { task.cancel() }
        devices[index].notificationTasks = []
        let link = devices[index].link
        if link != .idle {
            devices[index].link = .idle
            for next in scheduler.release(address) { startConnecting(next) }
        }
        if link == .connected || link == .connecting {
            let ble = self.ble
            Task { await ble.disconnect(address) }
        }
        for waiter in connectWaiters.removeValue(forKey: address) ?? [] {
            waiter.continuation.resume(throwing: JobFailure.error("the device was removed"))
        }
        publishEvent("device_removed", index)
        removeDiscovery(index)
        if devices[index].availability.published != nil {
            publish(stateTopic(index) + "/availability", [], retain: true)
        }
        if rule(index).retain ?? config.mqtt.retain, !devices[index].attributes.isEmpty {
            publish(stateTopic(index), [], retain: true)
        }
        devices.remove(at: index)
        indexByAddress[address] = nil
        for position in index..<devices.count { indexByAddress[devices[position].address] = position }
        counters.devicesRemoved += 1
        publishDevices()
    }

    /// `bridge/request/device/remove` `{"device": name or address, "transaction"?}`.
    func removeRequest(_ object: JSONValue, reply: CommandReply) {
        guard case .string(let name)? = object["device"],
            let index = devices.firstIndex(where: { $0.name == name }) ?? BluetoothAddress(name).flatMap({ indexByAddress[$0] })
        else {
            return respond(reply, .error, "device: expected the name or address of a known device")
        }
        let address = devices[index].address
        if !(queues[address] ?? []).isEmpty || draining.contains(address) {
            return respond(reply, .error, "\(devices[index].name) has a command in progress; try again when it has answered")
        }
        log(.notice, "\(devices[index].name) (\(address)): removed on request")
        removeDevice(index)
        respond(reply, .ok, nil)
    }
}
