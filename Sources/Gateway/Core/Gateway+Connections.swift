import Bluetooth

extension Gateway {
    /// Asks the scheduler for a connection slot; starts the devices it grants.
    func requestConnection(_ index: Int, urgent: Bool) {
        if devices[index].link == .idle { devices[index].link = .queued }
        let address = devices[index].address
        devices[index].retryAt = nil
        for granted in scheduler.request(address, urgent: urgent) { startConnecting(granted) }
    }

    func startConnecting(_ address: BluetoothAddress) {
        guard let index = indexByAddress[address] else {
            for next in scheduler.release(address) { startConnecting(next) }
            return
        }
        devices[index].link = .connecting
        devices[index].connectStartedAt = clock.now()
        connectTasks += 1
        let rule = rule(index)
        let ble = self.ble
        let timeout = config.bluetooth.connectTimeout
        let gattTimeout = config.bluetooth.gattTimeout
        let clock = self.clock
        Task {
            let result: Result<[BLECharacteristic], BLEPortError>
            do {
                try await ble.connect(address, timeout: timeout)
                let services: [BluetoothUUID]? = nil
                let found = try await withDeadline(clock.now() + gattTimeout, clock: clock) {
                    try await ble.discover(address, services: services)
                }
                result = .success(found)
            } catch let error as BLEPortError {
                result = .failure(error)
            } catch is DeadlineExceeded {
                result = .failure(BLEPortError(.connectionTimeout, "service discovery did not finish in \(gattTimeout)s"))
            } catch {
                result = .failure(BLEPortError(.other, "\(error)"))
            }
            await self.connectFinished(address, result, subscribe: rule.subscribe)
        }
    }

    func connectFinished(_ address: BluetoothAddress, _ result: Result<[BLECharacteristic], BLEPortError>,
                         subscribe: [CharacteristicSpec]) async {
        defer {
            connectTasks -= 1
            signalIdleIfNeeded()
        }
        guard let index = indexByAddress[address] else {
            // Removed while connecting: end the link the port just made.
            if case .success = result { await ble.disconnect(address) }
            return
        }
        let now = clock.now()
        switch result {
        case .failure(let error):
            counters.connectFailures += 1
            log(.warning, "\(devices[index].name): connect failed: \(error)")
            linkEnded(index, reason: error, now: now)
            publishEvent("device_connect_failed", index, error: error.description)
        case .success(let characteristics):
            guard devices[index].link == .connecting else { return }
            devices[index].characteristics = characteristics
            devices[index].link = .connected
            updateReconnect(index) { $0.connected(at: now) }
            counters.connects += 1
            if devices[index].everConnected { counters.reconnects += 1 }
            devices[index].everConnected = true
            let name = devices[index].name
            var tasks: [Task<Void, Never>] = []
            // Subscribed characteristics that can only be read (a read-only 2A19) are read once
            // per connection instead of failing to subscribe.
            var readOnce: [CharacteristicRef] = []
            for (specIndex, spec) in subscribe.enumerated() {
                guard let characteristic = characteristics.first(where: { spec.matches($0) }) else {
                    log(.warning, "\(name): characteristic \(spec.characteristic.shortDescription) not found")
                    continue
                }
                let properties = characteristic.properties
                if properties.contains(.read), !properties.contains(.notify), !properties.contains(.indicate) {
                    readOnce.append(CharacteristicRef(poll: false, index: specIndex))
                    continue
                }
                do {
                    let stream = try await ble.notifications(address, characteristic: characteristic)
                    tasks.append(Task { [weak self] in
                        for await value in stream { await self?.notification(address, spec: specIndex, value: value) }
                    })
                } catch {
                    log(.warning, "\(name): notifications of \(characteristic) failed: \(error)")
                }
            }
            // The device may have been removed while awaiting (indices shift): look it up again.
            guard let index = indexByAddress[address], devices[index].link == .connected else {
                for task in tasks { task.cancel() }
                if indexByAddress[address] == nil { await ble.disconnect(address) }
                return
            }
            devices[index].notificationTasks = tasks
            if !readOnce.isEmpty { enqueue(DeviceJob(kind: .read(readOnce), receivedAt: now), for: index) }
            let rule = rule(index)
            for spec in rule.poll.indices { devices[index].pollDue[spec] = now }
            if !rule.poll.isEmpty { armTimer(now) }
            if rule.connect { publishAvailability(index, online: true) }
            log(.info, "\(devices[index].name): connected")
            publishEvent("device_connected", index)
            publishDevices()
            let waiters = connectWaiters.removeValue(forKey: address) ?? []
            for waiter in waiters { waiter.continuation.resume() }
            if !rule.connect && (queues[address] ?? []).isEmpty && !draining.contains(address) {
                devices[index].idleDisconnectAt = now + config.commands.idleDisconnect
                armTimer(now + config.commands.idleDisconnect)
            }
        }
    }

    /// A link ended or an attempt failed: free the slot, fail waiters, plan a retry for
    /// devices that should stay connected.
    func linkEnded(_ index: Int, reason: BLEPortError?, now: Double) {
        let address = devices[index].address
        for task in devices[index].notificationTasks { task.cancel() }
        devices[index].notificationTasks = []
        devices[index].characteristics = []
        devices[index].idleDisconnectAt = nil
        for spec in devices[index].pollDue.indices { devices[index].pollDue[spec] = .infinity }
        devices[index].link = .idle
        for next in scheduler.release(address) { startConnecting(next) }
        let waiters = connectWaiters.removeValue(forKey: address) ?? []
        let failure = reason ?? BLEPortError(.peripheralDisconnected, "disconnected")
        for waiter in waiters { waiter.continuation.resume(throwing: failure) }
        let rule = rule(index)
        guard rule.connect else { return }
        publishAvailability(index, online: false)
        guard started, let reason else { return }
        if let delay = updateReconnect(index, { $0.failed(reason, at: now) }) {
            devices[index].retryAt = now + delay
            armTimer(now + delay)
            log(.info, "\(devices[index].name): reconnecting in \((delay * 100).rounded() / 100) s")
        } else {
            devices[index].gaveUp = true
            log(.error, "\(devices[index].name): not reconnecting: \(reason)")
        }
    }

    /// A link dropped (or was closed by the gateway), or came up.
    public func handle(_ event: BLEConnectionEvent) {
        switch event {
        case .connected(let discovery):
            adoptLink(discovery)
        case .disconnected(let address, let reason):
            guard let index = indexByAddress[address] else { return }
            let link = devices[index].link
            guard link == .connected || link == .disconnecting else { return }
            counters.disconnects += 1
            log(.info, "\(devices[index].name): disconnected\(reason.map { ": \($0)" } ?? "")")
            linkEnded(index, reason: link == .disconnecting ? nil : (reason ?? BLEPortError(.peripheralDisconnected, "link lost")),
                      now: clock.now())
            publishEvent("device_disconnected", index)
            publishDevices()
        }
    }

    /// A link is up that the gateway may not have made (one left up by another client before
    /// the start, say): a device whose rule wants a connection is connected through it now —
    /// the port's connect finds the link up — instead of waiting for an advertisement that a
    /// connected peripheral usually no longer sends. Links the gateway is making or has, or
    /// will retry after its backoff, are left alone, as are devices whose rule does not connect.
    func adoptLink(_ discovery: BLEDiscovery) {
        guard config.role.includesCentral else { return }
        let index: Int
        if let known = indexByAddress[discovery.address] {
            index = known
        } else {
            let matching = config.devices.first { $0.match.matches(discovery.address, discovery.advertisement) }
            guard matching?.connect == true, let registered = register(discovery) else { return }
            index = registered
        }
        guard awaitsConnection(index) else { return }
        log(.info, "\(devices[index].name): link already up: adopting it")
        requestConnection(index, urgent: false)
    }

    /// Runs `body` on the device's reconnect rule, made by the `reconnect` given to ``init`` the
    /// first time a connection succeeds or fails (advertisement-only devices never need one).
    func updateReconnect<Result>(_ index: Int, _ body: (inout any ReconnectStrategy) -> Result) -> Result {
        var strategy = devices[index].reconnect ?? makeReconnect()
        let result = body(&strategy)
        devices[index].reconnect = strategy
        return result
    }

    /// Whether the device's rule wants a link that nothing is working on: idle, no retry
    /// pending (a link reported up after an attempt failed — it came up and dropped during the
    /// attempt — waits for the backoff too), not given up.
    func awaitsConnection(_ index: Int) -> Bool {
        rule(index).connect && devices[index].link == .idle && devices[index].retryAt == nil && !devices[index].gaveUp
    }

    /// Suspends until the device is connected, connecting it on demand (ahead of background
    /// reconnects). Throws the connect error, or ``JobFailure/expired`` at `expiresAt`.
    func awaitConnection(_ address: BluetoothAddress, expiresAt: Double?) async throws {
        let index = try current(address)
        if devices[index].link == .connected { return }
        nextWaiterID += 1
        let id = nextWaiterID
        if let expiresAt { armTimer(expiresAt) }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            connectWaiters[address, default: []].append(ConnectionWaiter(id: id, expiresAt: expiresAt, continuation: continuation))
            if devices[index].link == .idle || devices[index].link == .queued {
                devices[index].reconnect?.reset()  // none yet: nothing to forget
                requestConnection(index, urgent: true)
            }
        }
    }
}

extension CharacteristicSpec {
    func matches(_ characteristic: BLECharacteristic) -> Bool {
        characteristic.uuid == self.characteristic && (service == nil || service == characteristic.service)
    }
}

extension CommandSpec {
    func matches(_ characteristic: BLECharacteristic) -> Bool {
        characteristic.uuid == self.characteristic && (service == nil || service == characteristic.service)
    }
}
