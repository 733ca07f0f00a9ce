import Bluetooth

/// The links to devices: who may connect now (``ConnectionScheduler``), connect jobs (connect,
/// discover, subscribe), reconnects with backoff, polls, and idle disconnects of on-demand
/// links. What a link change means for the rest of the core (availability, commands waiting,
/// events) is the gateway's to route: the methods here say what happened. Keyed by address:
/// jobs and the scheduler name devices so. Loop-confined.
final class ConnectionManager {
    private let context: CoreContext
    private let makeReconnect: @Sendable () -> any ReconnectStrategy
    private var scheduler: ConnectionScheduler
    private var links: [BluetoothAddress: LinkState] = [:]
    /// Told the free slots after an event that changed them (``observeSlots(initially:_:)``).
    private var slotsObservers: [@Sendable (Int) -> Void] = []
    private var notifiedFreeSlots = -1

    init(context: CoreContext, reconnect: @escaping @Sendable () -> any ReconnectStrategy) {
        self.context = context
        self.makeReconnect = reconnect
        scheduler = ConnectionScheduler(limit: context.config.bluetooth.totalConnections)
    }

    func phase(_ address: BluetoothAddress) -> LinkState.Phase { links[address]?.phase ?? .idle }
    func isConnected(_ address: BluetoothAddress) -> Bool { links[address]?.phase == .connected }
    /// The device's link as the web page shows it: its phase, parked, given up (nil: no link state).
    func link(_ address: BluetoothAddress) -> (phase: LinkState.Phase, parked: Bool, gaveUp: Bool)? {
        links[address].map { ($0.phase, $0.parked, $0.gaveUp) }
    }
    func characteristics(_ address: BluetoothAddress) -> [BLECharacteristic] { links[address]?.characteristics ?? [] }

    /// Links up now.
    var connectedCount: Int { links.values.count { $0.phase == .connected } }

    /// A device with a link state (one a rule connects) was heard advertising.
    func heard(_ address: BluetoothAddress) {
        if links[address]?.heardSinceFailure == false { links[address]?.heardSinceFailure = true }
    }

    /// Devices parked now (``LinkState/parked``).
    var parkedCount: Int { links.values.count(where: \.parked) }

    /// Whether the device's rule wants a link that nothing is working on: idle, no retry
    /// pending (a link reported up after an attempt failed — it came up and dropped during the
    /// attempt — waits for the backoff too), not given up.
    func awaitsConnection(_ address: BluetoothAddress, rule: DeviceRule) -> Bool {
        guard rule.connect else { return false }
        guard let link = links[address] else { return true }
        return link.phase == .idle && link.retryAt == nil && !link.gaveUp
    }

    /// Asks for a connection slot (`urgent`: a command waits, ahead of background reconnects);
    /// starts the devices the scheduler grants.
    func request(_ address: BluetoothAddress, ruleIndex: Int, urgent: Bool) {
        var link = links[address] ?? LinkState(ruleIndex: ruleIndex, polls: context.rule(ruleIndex).poll.count)
        if link.phase == .idle { link.phase = .queued }
        link.retryAt = nil
        links[address] = link
        for granted in scheduler.request(address, urgent: urgent) { startConnecting(granted) }
    }

    /// A command wants the link now: the backoff is forgotten and the device asks urgently
    /// (unless connecting or connected already).
    func requestForCommand(_ address: BluetoothAddress, ruleIndex: Int) {
        let phase = self.phase(address)
        guard phase == .idle || phase == .queued else { return }
        links[address]?.reconnect?.reset()  // none yet: nothing to forget
        request(address, ruleIndex: ruleIndex, urgent: true)
    }

    private func startConnecting(_ address: BluetoothAddress) {
        guard let link = links[address] else {
            for next in scheduler.release(address) { startConnecting(next) }
            return
        }
        links[address]?.phase = .connecting
        let rule = context.rule(link.ruleIndex)
        let ble = context.ble
        let clock = context.clock
        let deliver = context.deliver
        let timeout = context.config.bluetooth.connectTimeout
        let gattTimeout = context.config.bluetooth.gattTimeout
        let subscribe = rule.subscribe
        let parameters = rule.connectionParameters
        if let adapter = rule.preferAdapter {
            context.ble.preferAdapter(adapter, floorDBm: rule.preferFloorDBm, for: address)
        }
        context.jobs.spawn {
            .connect(
                address,
                await Self.establish(
                    address, subscribe: subscribe, parameters: parameters, ble: ble, clock: clock, timeout: timeout,
                    gattTimeout: gattTimeout, deliver: deliver))
        }
    }

    /// The connect job: the rule's `connection_params` loaded (a failure is a warning: the link
    /// is made with the kernel's defaults), connect, discover the characteristics, subscribe to
    /// the rule's `subscribe` entries (values go to the core as
    /// ``CoreEvent/notification(_:spec:value:)``).
    private static func establish(
        _ address: BluetoothAddress, subscribe: [CharacteristicSpec], parameters: ConnectionParameters?,
        ble: any BLEPort, clock: any GatewayClock, timeout: Double, gattTimeout: Double,
        deliver: @escaping @Sendable (CoreEvent) -> Void
    ) async -> Result<EstablishedLink, BLEPortError> {
        var loaded: ConnectionParameters?
        var warnings: [String] = []
        if let parameters {
            do throws(BLEPortError) {
                try await ble.loadConnectionParameters(parameters, for: address)
                loaded = parameters
            } catch {
                warnings.append("connection_params not applied (the kernel's defaults are used): \(error)")
            }
        }
        let characteristics: [BLECharacteristic]
        do {
            try await ble.connect(address, timeout: timeout)
            characteristics = try await withDeadline(clock.now() + gattTimeout, clock: clock) {
                try await ble.discover(address, services: nil)
            }
        } catch let error as BLEPortError {
            return .failure(error)
        } catch is DeadlineExceeded {
            return .failure(BLEPortError(.connectionTimeout, "service discovery did not finish in \(gattTimeout)s"))
        } catch {
            return .failure(BLEPortError(.other, "\(error)"))
        }
        var link = EstablishedLink(
            characteristics: characteristics, subscriptions: [], readOnce: [], warnings: warnings, parameters: loaded)
        // The link's ATT MTU goes with every value, for the check of cut notifications
        // (NotificationCut), known before the first one: the `MTU` property is there once the
        // services are resolved; without it (bluetoothd before 5.62) an `AcquireNotify`'s MTU is,
        // once a subscription is made.
        let mtu = LinkMTU(await ble.attMTU(address))
        // Subscribed characteristics that can only be read (a read-only 2A19) are read once per
        // connection instead of failing to subscribe.
        for (index, spec) in subscribe.enumerated() {
            guard let characteristic = characteristics.first(where: { spec.matches($0) }) else {
                link.warnings.append("characteristic \(spec.characteristic.shortDescription) not found")
                continue
            }
            let properties = characteristic.properties
            if properties.contains(.read), !properties.contains(.notify), !properties.contains(.indicate) {
                link.readOnce.append(CharacteristicRef(poll: false, index: index))
                continue
            }
            do {
                link.subscriptions.append(
                    try await ble.notifications(address, characteristic: characteristic) { value in
                        deliver(.notification(address, spec: index, value: value, mtu: mtu.value))
                    })
            } catch {
                link.warnings.append("notifications of \(characteristic) failed: \(error)")
            }
        }
        if mtu.value == nil, !link.subscriptions.isEmpty { mtu.set(await ble.attMTU(address)) }
        return .success(link)
    }

    /// What a finished connect job means.
    enum Established {
        /// The link is up: read these once, then the rule's polls start.
        case connected(readOnce: [CharacteristicRef], reconnect: Bool)
        /// The attempt failed (the link state was reset; see ``linkEnded(_:reason:rule:started:now:)``).
        case failed(BLEPortError)
        /// Nothing to do: the device was no longer connecting (its subscriptions were ended).
        case ignored
    }

    /// A connect job finished at `now`.
    func established(
        _ address: BluetoothAddress, _ result: Result<EstablishedLink, BLEPortError>, name: String,
        now: Double
    ) -> Established {
        switch result {
        case .failure(let error):
            context.counters.connectFailures += 1
            context.log(.warning, "\(name): connect failed: \(error)")
            return .failed(error)
        case .success(let established):
            guard var link = links[address], link.phase == .connecting else {
                for subscription in established.subscriptions { subscription.cancel() }
                return .ignored
            }
            for warning in established.warnings { context.log(.warning, "\(name): \(warning)") }
            link.characteristics = established.characteristics
            link.subscriptions = established.subscriptions
            link.phase = .connected
            link.failuresWithoutLink = 0
            if link.parked {
                link.parked = false
                context.log(.notice, "\(name): no longer parked: it accepted a connection")
            }
            updateReconnect(&link) { $0.connected(at: now) }
            context.counters.connects += 1
            let reconnect = link.everConnected
            if reconnect { context.counters.reconnects += 1 }
            link.everConnected = true
            for spec in link.pollDue.indices { link.pollDue[spec] = now }
            if !link.pollDue.isEmpty { context.due(at: now) }
            links[address] = link
            context.log(
                .info,
                "\(name): connected" + (established.parameters.map { " (connection_params asked for: \($0))" } ?? ""))
            return .connected(readOnce: established.readOnce, reconnect: reconnect)
        }
    }

    /// A connect job finished for a device that was removed meanwhile: the link it made ends.
    func establishedForRemoved(_ address: BluetoothAddress, _ result: Result<EstablishedLink, BLEPortError>) {
        guard case .success(let established) = result else { return }
        for subscription in established.subscriptions { subscription.cancel() }
        disconnect(address)
    }

    /// Whether a value of a subscribed characteristic counts: the link is up (or coming up: a
    /// value may arrive before the connect job's completion).
    func accepts(_ address: BluetoothAddress) -> Bool {
        let phase = self.phase(address)
        return phase == .connected || phase == .connecting
    }

    /// A link dropped (or the port says so of a link the gateway ended): nil when it was neither
    /// up nor being ended (nothing to tell), else whether the gateway was ending it.
    func dropped(_ address: BluetoothAddress) -> Bool? {
        guard let phase = links[address]?.phase, phase == .connected || phase == .disconnecting else { return nil }
        context.counters.disconnects += 1
        return phase == .disconnecting
    }

    /// A link ended or an attempt failed: its slot goes to the next device, its subscriptions
    /// end; a device whose rule stays connected gets a retry after its backoff (when the
    /// gateway runs and the end was not asked for). Returns true when this failure parked the
    /// device (``LinkState/parked``).
    @discardableResult
    func linkEnded(
        _ address: BluetoothAddress, reason: BLEPortError?, rule: DeviceRule, name: String, started: Bool, now: Double,
        attemptFailed: Bool = false
    ) -> Bool {
        guard var link = links[address] else { return false }
        for subscription in link.subscriptions { subscription.cancel() }
        link.subscriptions = []
        link.characteristics = []
        link.idleDisconnectAt = nil
        for spec in link.pollDue.indices { link.pollDue[spec] = .infinity }
        link.phase = .idle
        defer {
            for next in scheduler.release(address) { startConnecting(next) }
        }
        guard rule.connect, started, let reason else {
            links[address] = link
            return false
        }
        let settings = context.config.bluetooth
        if attemptFailed, reason.kind == .connectionTimeout, !link.everConnected {
            // Only a device that keeps advertising while it refuses counts toward parking; one
            // that went silent is out of range and will be back.
            link.failuresWithoutLink = link.heardSinceFailure ? link.failuresWithoutLink + 1 : 0
            link.heardSinceFailure = false
        }
        if link.parked || (settings.parkAfter > 0 && link.failuresWithoutLink >= settings.parkAfter) {
            let parkedNow = !link.parked
            link.parked = true
            link.retryAt = now + settings.parkedRetry
            context.due(at: now + settings.parkedRetry)
            if parkedNow {
                context.log(
                    .warning,
                    "\(name): parked: \(link.failuresWithoutLink) connection attempts failed and it never accepted one "
                        + "(a beacon or other non-connectable device matched by a connect rule?); trying again every "
                        + "\((settings.parkedRetry * 10).rounded() / 10) s: \(reason)")
            }
            links[address] = link
            return parkedNow
        }
        if let delay = updateReconnect(&link, { $0.failed(reason, at: now) }) {
            link.retryAt = now + delay
            context.due(at: now + delay)
            context.log(.info, "\(name): reconnecting in \((delay * 100).rounded() / 100) s")
        } else {
            link.gaveUp = true
            context.log(.error, "\(name): not reconnecting: \(reason)")
        }
        links[address] = link
        return false
    }

    /// The adapter is usable again (powered on again, or bluetoothd back after a restart): the
    /// devices waiting for a retry lost their links or failed to connect through no fault of
    /// their own, so each forgets its backoff and is tried now (the scheduler still bounds how
    /// many connect at once). Devices given up on stay so. Returns how many were waiting.
    func adapterReady() -> Int {
        let due = links.filter {
            $0.value.retryAt != nil && $0.value.phase == .idle && !$0.value.gaveUp && !$0.value.parked
        }
        for (address, link) in due {
            links[address]?.reconnect?.reset()
            request(address, ruleIndex: link.ruleIndex, urgent: false)
        }
        return due.count
    }

    // MARK: Slots shared with the Bluetooth proxy

    /// Connection slots free now for another user of the adapter (``reserveSlot(_:)``).
    var freeSlots: Int { scheduler.free }

    /// Takes a slot of `bluetooth.max_connections` for another user's link to `address` (the
    /// Bluetooth proxy), at once or not at all (``ConnectionScheduler/reserve(_:)``).
    func reserveSlot(_ address: BluetoothAddress) -> Bool { scheduler.reserve(address) }

    /// The other user's link to `address` is over: its slot goes to the next device waiting.
    func releaseSlot(_ address: BluetoothAddress) {
        for next in scheduler.unreserve(address) { startConnecting(next) }
    }

    /// `handler` gets ``freeSlots`` now (with `initially`) and, from ``notifySlots()``, after
    /// each event that changed it.
    func observeSlots(initially: Bool = true, _ handler: @escaping @Sendable (Int) -> Void) {
        slotsObservers.append(handler)
        notifiedFreeSlots = freeSlots
        if initially { handler(notifiedFreeSlots) }
    }

    /// After an event: the slots observers hear a change of the free slots.
    func notifySlots() {
        guard !slotsObservers.isEmpty, freeSlots != notifiedFreeSlots else { return }
        notifiedFreeSlots = freeSlots
        for observer in slotsObservers { observer(notifiedFreeSlots) }
    }

    /// Whether the gateway has a link to the device or is making one (the other user leaves
    /// such a link up when it is done with it).
    func holdsLink(_ address: BluetoothAddress) -> Bool {
        let phase = self.phase(address)
        return phase == .connecting || phase == .connected
    }

    /// A command waiting for an on-demand link expired: a device still only queued for a slot
    /// leaves the queue.
    func abandonQueued(_ address: BluetoothAddress, rule: DeviceRule) {
        guard links[address]?.phase == .queued, !rule.connect else { return }
        links[address]?.phase = .idle
        for next in scheduler.release(address) { startConnecting(next) }
    }

    /// Runs `body` on the device's reconnect rule, made by the gateway's `reconnect` factory the
    /// first time a connection succeeds or fails (advertisement-only devices never need one).
    private func updateReconnect<Result>(_ link: inout LinkState, _ body: (inout any ReconnectStrategy) -> Result)
        -> Result
    {
        var strategy = link.reconnect ?? makeReconnect()
        let result = body(&strategy)
        link.reconnect = strategy
        return result
    }

    /// Ends the link (a job; the port reports the end as a link event).
    func disconnect(_ address: BluetoothAddress) {
        let ble = context.ble
        context.jobs.spawn {
            await ble.disconnect(address)
            return .done
        }
    }

    /// The device is removed: its link ends and its state goes.
    func removed(_ address: BluetoothAddress) {
        guard let link = links.removeValue(forKey: address) else { return }
        for subscription in link.subscriptions { subscription.cancel() }
        if link.phase != .idle {
            for next in scheduler.release(address) { startConnecting(next) }
        }
        if link.phase == .connected || link.phase == .connecting { disconnect(address) }
    }

    /// What is due at `now`: reconnect retries (``request(_:ruleIndex:urgent:)``), polls of
    /// connected devices (handed to `poll`), and idle disconnects of on-demand links that no
    /// command uses (`busy` says which are in use) and the Bluetooth proxy does not hold: their
    /// idle time starts again.
    func tick(now: Double, busy: (BluetoothAddress) -> Bool, poll: (BluetoothAddress, Int) -> Void) {
        for (address, link) in links {
            if let retry = link.retryAt, now >= retry {
                links[address]?.retryAt = nil
                if link.phase == .idle { request(address, ruleIndex: link.ruleIndex, urgent: false) }
            }
            guard links[address]?.phase == .connected else { continue }
            let rule = context.rule(link.ruleIndex)
            for spec in link.pollDue.indices where now >= link.pollDue[spec] {
                let next = now + (rule.poll[spec].interval ?? 60)
                links[address]?.pollDue[spec] = next
                context.due(at: next)
                poll(address, spec)
            }
            if let idle = link.idleDisconnectAt, now >= idle {
                // In use by a command, or by the other user of the link (the Bluetooth proxy):
                // its idle time starts again.
                if busy(address) || scheduler.isReserved(address) {
                    links[address]?.idleDisconnectAt = now + context.config.commands.idleDisconnect
                    context.due(at: now + context.config.commands.idleDisconnect)
                } else {
                    links[address]?.idleDisconnectAt = nil
                    links[address]?.phase = .disconnecting
                    disconnect(address)
                }
            }
        }
    }

    /// An on-demand link (rule without `connect`) ends `commands.idle_disconnect` after `now`
    /// unless a command uses it meanwhile.
    func scheduleIdleDisconnect(_ address: BluetoothAddress, rule: DeviceRule, now: Double) {
        guard !rule.connect, links[address]?.phase == .connected else { return }
        let idle = now + context.config.commands.idleDisconnect
        links[address]?.idleDisconnectAt = idle
        context.due(at: idle)
    }

    /// The earliest retry, poll or idle disconnect.
    var nextDeadline: Double? {
        var next = Double.infinity
        for link in links.values {
            if let retry = link.retryAt { next = min(next, retry) }
            if let idle = link.idleDisconnectAt { next = min(next, idle) }
            if link.phase == .connected, let poll = link.pollDue.min() { next = min(next, poll) }
        }
        return next.isFinite ? next : nil
    }

    /// The gateway stops: every link it has or is making ends; returns their addresses (the
    /// gateway disconnects them all at once).
    func stop() -> [BluetoothAddress] {
        var ending: [BluetoothAddress] = []
        for (address, link) in links {
            for subscription in link.subscriptions { subscription.cancel() }
            links[address]?.subscriptions = []
            if link.phase == .connected || link.phase == .connecting {
                links[address]?.phase = .disconnecting
                ending.append(address)
            }
        }
        return ending
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
