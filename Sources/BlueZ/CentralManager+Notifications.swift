import Bluetooth
import DBus
import EventLoop

extension CentralManager {
    /// Notifications and indications of a characteristic, as an `AsyncThrowingStream` of values.
    ///
    /// Subscribes with `AcquireNotify` when BlueZ offers it (``CentralOptions/preferAcquireNotify``,
    /// `NotifyAcquired` present, `notify` flag), else `StartNotify`. The subscription outlives
    /// the link: after a drop, a power cycle or a bluetoothd restart it is renewed as soon as
    /// the peripheral is connected and resolved again (BlueZ keeps StartNotify sessions across
    /// drops; acquired sockets and sessions of a dead bluetoothd are re-created). A
    /// characteristic named before discovery (or restored from the state file) is subscribed
    /// when the peripheral connects. Several streams for one characteristic share one
    /// subscription in BlueZ.
    ///
    /// With `StartNotify`, values are BlueZ's `PropertiesChanged(Value)` signals; the one caused by
    /// our own ``readValue(for:)`` is held back and dropped, but a read by *another* client of
    /// the same characteristic shows up as a value (BlueZ cannot tell them apart; `AcquireNotify`
    /// has no such problem).
    ///
    /// The stream finishes when the consumer stops iterating (the last one unsubscribes in
    /// BlueZ), on ``disconnect(_:)`` of the peripheral or ``close()``; it finishes with an error
    /// when the characteristic cannot notify or no longer exists after service resolution.
    ///
    /// Buffering: the newest `bufferingNewest` values; a consumer that falls behind loses the oldest.
    /// - Throws: ``CentralError`` ``CentralError/Code/operationNotSupported`` when the characteristic
    ///   has neither `notify` nor `indicate`, or BlueZ's error from the first subscription.
    public func notifications(for characteristic: Characteristic, bufferingNewest limit: Int = 1024) async throws
        -> AsyncThrowingStream<[UInt8], any Error>
    {
        let (stream, continuation) = AsyncThrowingStream.makeStream(
            of: [UInt8].self, throwing: (any Error).self, bufferingPolicy: .bufferingNewest(limit))
        try await addConsumer(.stream(continuation), for: characteristic) { ended in
            continuation.onTermination = { _ in ended() }
        }
        return stream
    }

    /// Notifications and indications of a characteristic with flow control instead of
    /// dropping: when `highWater` values wait for the consumer, the central stops reading the
    /// characteristic's `AcquireNotify` socket until the consumer has taken half of them, so the
    /// backlog waits in the kernel's socket buffer and with the sender rather than in this
    /// process (``NotificationValues``; values that come as D-Bus signals are not paused).
    /// Subscription, renewal and ending as ``notifications(for:bufferingNewest:)``.
    /// - Throws: as ``notifications(for:bufferingNewest:)``.
    public func notifications(for characteristic: Characteristic, pausingAbove highWater: Int) async throws
        -> NotificationValues
    {
        let loop = self.loop
        let channel = NotificationChannel(highWater: highWater) { [weak self] in
            guard let self else { return }
            loop.execute { self.assumeIsolated { $0.resumeDrainedSockets() } }
        }
        let handle = NotificationValues.Handle(channel)
        try await addConsumer(.channel(channel), for: characteristic) { ended in channel.setOnTerminate(ended) }
        return NotificationValues(handle: handle)
    }

    /// Notifications and indications of a characteristic, handed to `handler` on the loop thread
    /// as each arrives — inside the read of the `AcquireNotify` datagram or the handling of the
    /// `Value` signal: no stream, no buffer, no task, so the handler must not block. After the
    /// last value, `handler` gets ``NotificationDelivery/ended(_:)`` once when the subscription
    /// ends for a reason other than ``endNotifications(_:)`` (disconnect, close, a failed renewal).
    /// Subscription and renewal as ``notifications(for:bufferingNewest:)``.
    /// - Throws: as ``notifications(for:bufferingNewest:)``.
    public func notifications(
        for characteristic: Characteristic, handler: @escaping @Sendable (NotificationDelivery) -> Void
    ) async throws -> NotificationToken {
        var token: NotificationToken?
        try await addConsumer(.handler(handler), for: characteristic) { _ in
        } registered: { key, id in
            token = NotificationToken(characteristic: key, id: id)
        }
        guard let token else {
            throw CentralError(
                .failed, operation: "subscribe to \(characteristic)", message: "the subscription was not registered")
        }
        return token
    }

    /// Ends a ``notifications(for:handler:)`` consumer: its handler is not called again; the last
    /// consumer of a characteristic unsubscribes in BlueZ.
    public func endNotifications(_ token: NotificationToken) {
        consumerEnded(token.characteristic, token.id)
    }

    /// A flow-controlled consumer drained to half: read the sockets it paused again.
    func resumeDrainedSockets() {
        for subscription in subscriptions.values { subscription.resumeIfDrained() }
    }

    /// Registers `consumer` for `characteristic` and subscribes in BlueZ when it is the first.
    /// `onEnd` installs the hook the consumer calls when it goes away.
    private func addConsumer(
        _ consumer: NotifySubscription.Consumer, for characteristic: Characteristic,
        onEnd: (_ ended: @escaping @Sendable () -> Void) -> Void,
        registered: (Characteristic, Int) -> Void = { _, _ in }
    ) async throws {
        let operation = "subscribe to \(characteristic)"
        if closed { throw closedError(operation) }
        var key = characteristic
        if state == .poweredOn, let (_, resolved) = try? resolve(characteristic, operation: operation) {
            key = resolved
            guard !resolved.properties.isDisjoint(with: [.notify, .indicate]) else {
                throw CentralError(
                    .operationNotSupported, operation: operation,
                    message: "the characteristic's flags (\(resolved.properties)) allow neither notify nor indicate")
            }
        }
        if subscriptions[key] == nil,
            let existing = subscriptions.keys.first(where: { Self.sameCharacteristic($0, key) })
        {
            key = existing
        }
        restoredSubscriptions.removeAll { Self.sameCharacteristic($0, key) }
        let subscription = subscriptions[key] ?? NotifySubscription(key)
        subscriptions[key] = subscription
        let id = makeID()
        subscription.consumers[id] = consumer
        registered(key, id)
        let subscribed = key
        onEnd { [weak self] in
            guard let self else { return }
            self.loop.execute { self.assumeIsolated { $0.consumerEnded(subscribed, id) } }
        }
        saveState()
        await updateMatchRules()  // its Value signals (StartNotify) on the kernel's path
        if !subscription.isActiveOrActivating, isResolved(key.peripheral) {
            do {
                try await activate(key)
            } catch let error as CentralError where Self.isPermanent(error) {
                subscription.consumers.removeValue(forKey: id)
                if subscription.consumers.isEmpty {
                    subscriptions.removeValue(forKey: key)
                    saveState()
                }
                throw error
            } catch {
                // transient (link dropped meanwhile): renewed after reconnection
            }
        }
    }

    static func sameCharacteristic(_ a: Characteristic, _ b: Characteristic) -> Bool {
        a.peripheral == b.peripheral && a.service == b.service && a.uuid == b.uuid
            && (a.handle == 0 || b.handle == 0 || a.handle == b.handle)
    }

    static func isPermanent(_ error: CentralError) -> Bool {
        [.operationNotSupported, .notPermitted, .unknownDevice, .unauthorized].contains(error.code)
    }

    func isResolved(_ address: BluetoothAddress) -> Bool {
        guard state == .poweredOn, let path = devicePath(address), let device = tree.device(path) else {
            return false
        }
        return device.isConnected && device.servicesResolved
    }

    /// Subscribes in BlueZ (AcquireNotify, else StartNotify). Idempotent while active.
    func activate(_ key: Characteristic) async throws {
        guard let subscription = subscriptions[key] else { return }
        if case .acquired(let socket) = subscription.mode, socket.isOpen { return }
        if case .activating = subscription.mode { return }
        let operation = "subscribe to \(key)"
        let (path, resolved) = try resolve(key, operation: operation)
        guard !resolved.properties.isDisjoint(with: [.notify, .indicate]) else {
            throw CentralError(
                .operationNotSupported, operation: operation,
                message: "the characteristic allows neither notify nor indicate")
        }
        subscription.mode = .activating
        subscription.path = path
        subscriptionPaths[path] = key
        let props = tree.properties(path, BlueZObjectTree.characteristic) ?? [:]
        if options.preferAcquireNotify, props["NotifyAcquired"] != nil, resolved.properties.contains(.notify),
            props["NotifyAcquired"]?.bool != true
        {
            do {
                let reply = try await callBlueZ(
                    path, BlueZObjectTree.characteristic, "AcquireNotify", [.variantDictionary([String: DBusValue]())])
                guard reply.count == 2, let fd = reply[0].unixFD, let mtu = reply[1].int else {
                    throw CentralError(.failed, operation: operation, message: "AcquireNotify replied with \(reply)")
                }
                let socket = NotifySocket(
                    fd: try fd.duplicate(), mtu: mtu, loop: loop,
                    onDatagram: { [weak subscription] bytes in subscription?.deliver(bytes) },
                    onClose: { [weak self] in
                        self?.assumeIsolated { $0.socketClosed(key) }
                    })
                guard subscriptions[key] === subscription else {
                    socket.close()
                    return
                }
                subscription.mode = .acquired(socket)
                return
            } catch {
                // Fall back to StartNotify (e.g. another client holds a StartNotify session → InProgress).
            }
        }
        subscription.mode = .started
        do {
            _ = try await callBlueZ(path, BlueZObjectTree.characteristic, "StartNotify")
        } catch {
            let failure = gattError(error, key.peripheral, "org.bluez.GattCharacteristic1.StartNotify \(key)")
            // InProgress: our session exists and waits for the reconnection (sticky) — that is a subscription.
            if failure.code != .inProgress {
                if subscriptions[key] === subscription { subscription.mode = .inactive }
                throw failure
            }
        }
        if subscriptions[key] !== subscription {
            _ = try? await callBlueZ(path, BlueZObjectTree.characteristic, "StopNotify")
        }
    }

    func socketClosed(_ key: Characteristic) {
        guard let subscription = subscriptions[key] else { return }
        if case .acquired(let socket) = subscription.mode, !socket.isOpen { subscription.mode = .inactive }
        // Still connected and resolved (e.g. BlueZ closed it for another reason): acquire again.
        if isResolved(key.peripheral) {
            Task { try? await self.activate(key) }
        }
    }

    /// The peripheral (re)resolved its services: renew its subscriptions.
    func servicesResolved(_ address: BluetoothAddress) {
        for (key, subscription) in subscriptions where key.peripheral == address {
            if case .acquired(let socket) = subscription.mode, socket.isOpen { continue }
            if case .activating = subscription.mode { continue }
            Task {
                do {
                    try await self.activate(key)
                } catch let error as CentralError where Self.isPermanent(error) {
                    self.subscriptionFailed(key, error)
                } catch {}
            }
        }
    }

    func subscriptionFailed(_ key: Characteristic, _ error: CentralError) {
        guard let subscription = subscriptions.removeValue(forKey: key) else { return }
        scheduleMatchRuleUpdate()
        if let path = subscription.path { subscriptionPaths.removeValue(forKey: path) }
        subscription.finish(throwing: error)
        saveState()
    }

    func consumerEnded(_ key: Characteristic, _ id: Int) {
        guard let subscription = subscriptions[key], subscription.consumers.removeValue(forKey: id) != nil else {
            return
        }
        guard subscription.consumers.isEmpty else {
            subscription.resumeIfDrained()
            return
        }
        subscriptions.removeValue(forKey: key)
        stopNotifying(subscription)
        saveState()
        scheduleMatchRuleUpdate()
    }

    /// Ends the subscription in BlueZ (StopNotify or closing the socket).
    func stopNotifying(_ subscription: NotifySubscription) {
        if let path = subscription.path, subscriptionPaths[path] == subscription.characteristic {
            subscriptionPaths.removeValue(forKey: path)
        }
        switch subscription.mode {
        case .acquired(let socket):
            socket.close()
        case .started, .activating:
            if let path = subscription.path, bluezOwner != nil {
                Task {
                    _ = try? await self.callBlueZ(
                        path, BlueZObjectTree.characteristic, "StopNotify", timeout: .seconds(10))
                }
            }
        case .inactive:
            break
        }
        subscription.mode = .inactive
    }

    /// A `Value` change of a characteristic: a notification, or the echo of a read.
    func valueChanged(_ path: DBusObjectPath, _ bytes: [UInt8]) {
        if heldValues[path] != nil {
            heldValues[path]?.append(bytes)
            return
        }
        if let echo = expectedEchoes.removeValue(forKey: path), echo.bytes == bytes,
            EventLoop.now() - echo.at < 500_000_000
        {
            return
        }
        guard let key = subscriptionPaths[path], let subscription = subscriptions[key] else { return }
        switch subscription.mode {
        case .started, .activating: subscription.deliver(bytes)
        case .acquired, .inactive: break
        }
    }

    /// A read finished: deliver the `Value` signals held back meanwhile, minus the read's own.
    func releaseHeldValues(_ path: DBusObjectPath, readResult: [UInt8]?) {
        guard var held = heldValues.removeValue(forKey: path) else { return }
        if let readResult {
            if let index = held.firstIndex(of: readResult) {
                held.remove(at: index)
            } else if subscriptionPaths[path] != nil {
                expectedEchoes[path] = (readResult, EventLoop.now())
            }
        }
        for bytes in held { valueChanged(path, bytes) }
    }
}
