import Bluetooth
import BluetoothManagement
import DBus

extension CentralManager {
    /// Connects to a peripheral (`Device1.Connect`) and returns once the link is up — before
    /// service discovery, which ``discoverServices(_:for:)`` waits for.
    ///
    /// A peripheral already connected in BlueZ succeeds at once. A device BlueZ does not know
    /// yet (e.g. right after a bluetoothd restart) is waited for until a scan reports it; on the
    /// kernel's path, where a passive scan leaves bluetoothd knowing nothing, its discovery runs
    /// meanwhile (active, as briefly as it takes bluetoothd to hear the device).
    /// - Parameters:
    ///   - timeout: the whole attempt; when it passes the attempt is cancelled in BlueZ and
    ///     ``CentralError/Code/connectionTimeout`` is thrown.
    ///   - autoReconnect: keep the connection up: after a failure of this attempt, a link drop,
    ///     an adapter power cycle or a bluetoothd restart the manager reconnects by itself with
    ///     the backoff of ``CentralOptions/reconnect`` (``ConnectionEvent``s report each outcome)
    ///     until ``disconnect(_:)``. The connection is saved in the state file either way (with
    ///     `autoReconnect` as `connect`: the next start reconnects it by itself; without, the
    ///     app finds it in ``restoredPeripherals``) until ``disconnect(_:)`` or a failed attempt
    ///     without a link.
    /// - Returns: a fresh snapshot of the peripheral.
    /// - Throws: ``CentralError``: `connectionTimeout`, `connectionFailed` (BlueZ's
    ///   "le-connection-abort-by-local"), `cancelled` (a ``disconnect(_:)`` meanwhile),
    ///   `poweredOff`/`bluezUnavailable` when not `.poweredOn`.
    @discardableResult
    public func connect(_ peripheral: Peripheral, timeout: Duration = .seconds(30), autoReconnect: Bool = true)
        async throws
        -> Peripheral
    {
        let address = peripheral.address
        try requirePoweredOn("connect \(address)")
        var link = links[address] ?? Link(configuration: options.reconnect)
        link.autoReconnect = autoReconnect
        link.policy.reset()
        if let timer = link.retryTimer {
            loop.cancelTimer(timer)
            link.retryTimer = nil
        }
        links[address] = link
        disconnectsRequested.remove(address)
        saveState()
        do {
            try await establish(address, timeout: timeout)
        } catch {
            let failure = CentralError.wrap(error, operation: "connect \(address)")
            emit(.failedToConnect(self.peripheral(address), failure))
            if links[address]?.autoReconnect == true {
                scheduleReconnect(address, after: failure)
            } else if links[address]?.connected != true {
                links.removeValue(forKey: address)
                saveState()
                scheduleMatchRuleUpdate()
            }
            throw failure
        }
        return self.peripheral(address)
    }

    /// One connection attempt: waits for the device object, calls `Connect` unless already
    /// connected, and waits until `Connected=true` is seen.
    func establish(_ address: BluetoothAddress, timeout: Duration) async throws {
        let operation = "connect \(address)"
        let start = ContinuousClock.now
        links[address]?.connecting = true
        defer { links[address]?.connecting = false }
        let learns = reports == .kernel && !isKnown(address)
        if learns { startLearning(address) }
        defer { if learns { stopLearning(address) } }
        let path: DBusObjectPath = try await waitUntil(timeout: timeout, operation: operation) { central in
            guard central.state == .poweredOn else { return .failure(central.stateError(operation)) }
            guard let path = central.devicePath(address), central.tree.device(path) != nil else {
                return nil
            }
            return .success(path)
        }
        // On the kernel's path the device's signals reach the central only once its rule is on the
        // bus (BlueZMatchRules.swift): before Connect, and its properties read again after it.
        await updateMatchRules()
        if tree.device(path)?.isConnected == true { return }
        let remaining = timeout - (ContinuousClock.now - start)
        let timesUpBefore = links[address]?.timesUp ?? 0
        do {
            // A pending connection is cancelled with Disconnect (BlueZ answers the Connect with
            // "br-connection-canceled").
            try await callDevice(
                path, "Connect", within: remaining, cancel: "Disconnect",
                timeout: CentralError(
                    .connectionTimeout, operation: operation, message: "no connection within \(timeout)"))
        } catch {
            throw CentralError.wrap(error, operation: "org.bluez.Device1.Connect \(address)")
        }
        // BlueZ emits Connected=true just before the reply; wait until it has been processed. The
        // link may be down again by then (the peer dropped it at once): it came up, which is what
        // this attempt waits for; the drop was reported as a disconnection.
        // bluetoothd 5.66 skips that signal when the ATT channel came up before the kernel's
        // connected event ("Device … is already connected"), and the ServicesResolved that
        // implies it can be seconds away under load: then the property itself says so.
        if tree.device(path)?.isConnected != true,
            let reply = try? await callBlueZ(
                path, "org.freedesktop.DBus.Properties", "Get",
                [.string(BlueZObjectTree.device), .string("Connected")],
                timeout: .seconds(5)),
            reply.first?.bool == true
        {
            connectedWithoutSignal(path)
        }
        let _: Void = try await waitUntil(timeout: .seconds(5), operation: operation, timeoutCode: .connectionFailed) {
            central in
            guard let device = central.tree.device(path) else {
                return .failure(
                    CentralError(.unknownDevice, operation: operation, message: "the device object was removed"))
            }
            let cameUp = (central.links[address]?.timesUp ?? 0) > timesUpBefore
            return device.isConnected || cameUp ? .success(()) : nil
        }
        // Already down again: a retry that fired meanwhile was skipped (this attempt was running).
        if links[address]?.connected == false, links[address]?.retryTimer == nil {
            scheduleReconnect(
                address, after: CentralError(.peripheralDisconnected, operation: operation, message: "the link dropped")
            )
        }
    }

    /// Disconnects (`Device1.Disconnect`, about 2 s in BlueZ) and forgets the connection: no
    /// automatic reconnection, notification streams of the peripheral finish, the state file
    /// no longer lists it. Returns once `Connected=false` is seen. Cancels a pending connect.
    /// Disconnecting a peripheral that is not connected succeeds.
    public func disconnect(_ peripheral: Peripheral) async throws {
        let address = peripheral.address
        let operation = "disconnect \(address)"
        // Its rule goes once the link is down (the wait below needs Connected=false).
        defer { scheduleMatchRuleUpdate() }
        if let link = links.removeValue(forKey: address), let timer = link.retryTimer { loop.cancelTimer(timer) }
        for (key, subscription) in subscriptions where key.peripheral == address {
            subscriptions.removeValue(forKey: key)
            subscription.finish(throwing: nil)
            stopNotifying(subscription)
        }
        restoredSubscriptions.removeAll { $0.peripheral == address }
        heldRestoredPeripherals.remove(address)
        saveState()
        guard let path = devicePath(address), let connected = tree.device(path)?.isConnected else { return }
        if connected { disconnectsRequested.insert(address) }
        do {
            _ = try await callBlueZ(path, BlueZObjectTree.device, "Disconnect", timeout: .seconds(15))
        } catch {
            let failure = CentralError.wrap(error, operation: "org.bluez.Device1.Disconnect \(address)")
            if failure.code == .unknownDevice { return }
            disconnectsRequested.remove(address)
            throw failure
        }
        guard connected else { return }
        try await waitUntil(timeout: .seconds(10), operation: operation) { central in
            central.tree.device(path)?.isConnected == true ? nil : .success(())
        }
    }

    /// Calls `method` of the device and waits at most `limit` for its answer (the call itself
    /// may take 5 s more): then BlueZ is told to stop with `cancel` (not awaited) and `timeout`
    /// is thrown. Other failures are thrown as they came.
    func callDevice(
        _ path: DBusObjectPath, _ method: String, within limit: Duration, cancel: String, timeout: CentralError
    ) async throws {
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    _ = try await self.callBlueZ(path, BlueZObjectTree.device, method, timeout: limit + .seconds(5))
                }
                group.addTask {
                    try await Task.sleep(for: limit)
                    throw timeout
                }
                defer { group.cancelAll() }
                try await group.next()
            }
        } catch let error as CentralError where error == timeout {
            Task { _ = try? await self.callBlueZ(path, BlueZObjectTree.device, cancel, timeout: .seconds(5)) }
            throw error
        }
    }

    /// Connection changes of every peripheral: first a `.connected` for each link up now
    /// (including adopted ones), then every change as it happens, on the loop thread.
    ///
    /// Buffering: unbounded (events are rare); finishes when the manager is closed.
    public func connectionEvents() -> AsyncStream<ConnectionEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: ConnectionEvent.self)
        for peripheral in connectedPeripherals() { continuation.yield(.connected(peripheral)) }
        guard let id = register(continuation) else { return stream }
        connectionContinuations[id] = .stream(continuation)
        continuation.onTermination = unregistering { _ = $0.connectionContinuations.removeValue(forKey: id) }
        return stream
    }

    /// Connection changes like ``connectionEvents()``, handed to `handler` on the loop thread as
    /// they happen (no stream, no task): first a `.connected` for each link up now, before this
    /// returns. Lasts until ``stopConnectionEvents(_:)`` or ``close()``.
    public func connectionEvents(handler: @escaping @Sendable (ConnectionEvent) -> Void) -> ConnectionEventsToken {
        for peripheral in connectedPeripherals() { handler(.connected(peripheral)) }
        return ConnectionEventsToken(
            id: connectionContinuations.addHandler(handler, id: makeID(), unlessClosed: closed))
    }

    /// Ends a ``connectionEvents(handler:)`` registration.
    public func stopConnectionEvents(_ token: ConnectionEventsToken) {
        connectionContinuations.removeValue(forKey: token.id)
    }

    func emit(_ event: ConnectionEvent) {
        for sink in connectionContinuations.values { sink.deliver(event) }
        // A link that came up or went down may change which devices are watched.
        scheduleMatchRuleUpdate()
    }

    /// bluetoothd says `Connected` is true but did not signal it (see ``establish(_:timeout:)``):
    /// recorded as if it had.
    func connectedWithoutSignal(_ path: DBusObjectPath) {
        guard tree.device(path)?.isConnected != true,
            tree.change(
                path, interface: BlueZObjectTree.device, changed: ["Connected": .boolean(true)], invalidated: [])
        else { return }
        if isOurDevice(path), let peripheral = peripheral(at: path) {
            linkCameUp(peripheral)
        } else {
            evaluateWaiters()
        }
    }

    func linkCameUp(_ peripheral: Peripheral) {
        if links[peripheral.address] != nil {
            links[peripheral.address]?.connected = true
            links[peripheral.address]?.timesUp += 1
            links[peripheral.address]?.policy.connected(at: Self.now)
        }
        emit(.connected(peripheral))
        evaluateWaiters()
    }

    func linkWentDown(_ peripheral: Peripheral, reason: CentralError?) {
        let address = peripheral.address
        let requested = disconnectsRequested.remove(address) != nil
        var error: CentralError? = nil
        if !requested {
            if let reason {
                error = reason
            } else if state != .poweredOn
                || adapterPath.flatMap({ tree.properties($0, BlueZObjectTree.adapter)?["Powered"]?.bool }) == false
            {
                error = CentralError(
                    .poweredOff, operation: "connection \(address)", message: "the adapter was powered off")
            } else {
                error = CentralError(
                    .peripheralDisconnected, operation: "connection \(address)", message: "the link dropped")
            }
        }
        var snapshot = peripheral
        snapshot.isConnected = false
        snapshot.servicesResolved = false
        emit(.disconnected(snapshot, error))
        links[address]?.connected = false
        for (key, subscription) in subscriptions where key.peripheral == address { subscription.linkDown() }
        if let error, links[address]?.autoReconnect == true { scheduleReconnect(address, after: error) }
    }

    /// Asks the reconnect policy when to try again and arms a timer (never a tight loop).
    func scheduleReconnect(_ address: BluetoothAddress, after error: CentralError) {
        guard var link = links[address], link.autoReconnect, link.retryTimer == nil, !closed else { return }
        switch link.policy.failed(error.reconnectFailure, at: Self.now) {
        case .giveUp:
            link.autoReconnect = false
            links[address] = link
            saveState()
        case .retry(let delay):
            link.retryTimer = loop.addTimer(after: delay) { [weak self] in
                self?.assumeIsolated { $0.retryFired(address) }
            }
            links[address] = link
        }
    }

    func retryFired(_ address: BluetoothAddress) {
        links[address]?.retryTimer = nil
        guard state == .poweredOn else { return }  // poweredOn() retries everything
        startReconnect(address)
    }

    func startReconnect(_ address: BluetoothAddress) {
        guard let link = links[address], link.autoReconnect, !link.connecting, !link.connected else { return }
        links[address]?.connecting = true
        Task { await self.reconnectAttempt(address) }
    }

    private func reconnectAttempt(_ address: BluetoothAddress) async {
        links[address]?.connecting = false
        guard let link = links[address], link.autoReconnect, !link.connected, !closed else { return }
        do {
            try await establish(address, timeout: .seconds(30))
        } catch {
            let failure = CentralError.wrap(error, operation: "reconnect \(address)")
            guard links[address] != nil else { return }
            emit(.failedToConnect(peripheral(address), failure))
            scheduleReconnect(address, after: failure)
        }
    }

    /// The adapter is (again) powered and BlueZ's objects are known: re-arm discovery and bring
    /// wanted connections back without waiting out their backoff.
    func poweredOn() {
        armDiscovery()
        for (address, link) in links where link.autoReconnect && !link.connected {
            if let timer = link.retryTimer {
                loop.cancelTimer(timer)
                links[address]?.retryTimer = nil
            }
            links[address]?.policy.reset()
            startReconnect(address)
        }
    }
}

extension CentralManager {
    /// Why the kernel says the link to `address` went down (``KernelRadio/disconnectReason(controller:address:)``):
    /// only on the management path (bluetoothd 5.66 tells its D-Bus clients no reason), asked
    /// once per drop, after the link's `Connected=false` arrived. Nil on the D-Bus path or when
    /// the kernel told nothing.
    public func kernelDisconnectReason(_ address: BluetoothAddress) -> DisconnectReason? {
        guard let radio = passiveScanner, let adapterIndex else { return nil }
        return radio.assumeLoopIsolated { $0.disconnectReason(controller: adapterIndex, address: address) }
    }
}

extension CentralManager {
    /// bluetoothd's discovery runs (active) while `address` is waited for (``learning``).
    func startLearning(_ address: BluetoothAddress) {
        learning[address, default: 0] += 1
        if learning[address] == 1 { armDiscovery() }
    }

    func stopLearning(_ address: BluetoothAddress) {
        guard let count = learning[address] else { return }
        learning[address] = count > 1 ? count - 1 : nil
        if learning[address] == nil { armDiscovery() }
    }

    /// Whether this manager's kernel reports had `address` lately (the management path; reports
    /// bluetoothd may not know of while the scan is passive).
    public func heardByKernel(_ address: BluetoothAddress) -> Bool {
        reports == .kernel && kernelNames[address] != nil
    }
}
