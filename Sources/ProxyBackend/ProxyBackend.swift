import Bluetooth
import ESPHomeAPI
import EventLoop
import Gateway
import JSON
import Synchronization

/// Connections through the Bluetooth proxy (docs/ha-bluetooth-proxy.md): the
/// ``BluetoothProxyBackend`` of the ESPHome API server, on a central behind the ``ProxyBLE``
/// port. A connect connects the peripheral (no automatic reconnection: the client decides) and
/// waits for its services, whose ATT handles name characteristics and descriptors in the
/// client's requests. Only devices the central knows are connected.
///
/// It is the gateway core's ``GatewayAttachment``: made before the ``Gateway`` and handed to it,
/// which gives it the ``AttachedCore`` through which it shares the core's one
/// ``ConnectionScheduler`` and one job runner. Each connection takes a slot of
/// `bluetooth.max_connections` (a reservation: at once or not at all) from the connect until
/// the device is idle here again — no connect, no disconnect running — and a device the gateway
/// holds a link to shares its slot, that link left up when the client is done with it. Every
/// call to the central (connect, GATT, disconnect, pairing, forgetting a device) is a job of the
/// core; its outcome comes back as an event of the core, which the gateway routes here
/// (``completed(_:)``), and becomes the server's answer.
///
/// An actor on the loop's executor: the server's requests, the core's events and the central's
/// link and notification callbacks all arrive on the loop thread and enter it synchronously
/// (`assumeLoopIsolated`). ``stop()`` makes the disconnects under way (again) and waits for them.
public actor ProxyBackend<BLE: ProxyBLE>: LoopIsolated, BluetoothProxyBackend, GatewayAttachment {
    public nonisolated let loop: EventLoop
    public nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }
    let ble: BLE
    /// Set once by the gateway's initializer (``attach(_:)``), before anything calls the backend;
    /// a lock rather than actor state because the gateway may be made off the loop thread.
    private nonisolated let attached = Mutex<AttachedCore?>(nil)
    private nonisolated var core: AttachedCore? { attached.withLock { $0 } }
    /// The server: link losses and notifications go to it, `bridge/health` reads its counters.
    private weak var events: (any ProxyEvents)?
    private var linkEvents: BLE.LinkEvents?
    /// Serving connections (``start()``): without, the server is not told of slot changes.
    private var serving = false

    typealias GATT = ProxyGATT<BLE.Characteristic, BLE.Descriptor>
    typealias Job = @Sendable () async -> Outcome

    /// What a job of the backend reports, as the core hands it back.
    enum Outcome: Sendable {
        case connected(
            BluetoothAddress, generation: Int, Result<GATT, ProxyFailure>,
            done: @Sendable (Result<UInt32, ProxyFailure>) -> Void)
        /// `interrupted`: the job was cancelled (the core's jobs end before the proxy's stop,
        /// which makes the disconnect again).
        case disconnected(BluetoothAddress, interrupted: Bool)
        /// A GATT or pairing answer: the server's completion, with the result.
        case answered(@Sendable () -> Void)
        case notifying(
            BluetoothAddress, generation: Int, handle: UInt16, Result<BLE.Subscription, ProxyFailure>,
            done: @Sendable (ProxyFailure?) -> Void)
        case forgot(
            BluetoothAddress, generation: Int?, removed: Bool, failure: ProxyFailure?,
            done: @Sendable (ProxyFailure?) -> Void)
    }

    /// One device connected (or connecting) for a client.
    private struct Device {
        let generation: Int
        var connected = false
        /// It was connected already (by the gateway): the proxy does not disconnect it.
        var adopted = false
        /// An unpair or clear cache is making the central forget the device: the end of its link
        /// is reported after that answer, not as a link lost.
        var removing = false
        var gatt: GATT?
        var configurationDescriptors: Set<UInt16> = []
        var notifications: [UInt16: BLE.Subscription] = [:]
    }

    private var devices: [BluetoothAddress: Device] = [:]

    /// A connect waiting for a disconnect of the same device.
    private struct WaitingConnect {
        let job: Job
        let done: @Sendable (Result<UInt32, ProxyFailure>) -> Void
    }

    /// A device's disconnect under way (one at a time per device).
    private struct Disconnecting {
        /// Another disconnect was asked for meanwhile: one more follows this one.
        var again = false
        /// Connects of the device, started once the link is down.
        var waiting: [WaitingConnect] = []
    }

    /// Disconnects under way (a connect to the same device waits for their end first).
    private var disconnects: [BluetoothAddress: Disconnecting] = [:]
    /// Devices with a connect running or waiting (one at a time per device).
    private var connecting: Set<BluetoothAddress> = []
    private var nextGeneration = 0
    /// Once ``stop()`` began: jobs run in its own task group, not the core's (whose jobs ended).
    private var stopping = false
    private var stopJobs: [Job] = []

    public init(ble: BLE, loop: EventLoop) {
        self.ble = ble
        self.loop = loop
    }

    /// The server the backend serves (and reports to); call on the loop once the server exists.
    public func serve(_ events: any ProxyEvents) {
        self.events = events
    }

    /// Follows links going down; call once, before clients can connect.
    public func start() async {
        serving = true
        linkEvents = await ble.linkEvents { [weak self] address, end in
            self?.assumeLoopIsolated { $0.linkLost(address, end) }
        }
    }

    /// Call after the server's stop (which disconnects every connection of its clients) and
    /// after the core's jobs ended: makes every disconnect under way — their jobs were the core's
    /// and may have been cancelled with them — again here, as child tasks, and returns once they
    /// ended (the central answers each after BlueZ's ~2 s disconnect timer), or once the calling
    /// task is cancelled (the stop's deadline); then stops following links.
    public func stop() async {
        stopping = true
        for address in disconnects.keys { stopJobs.append(disconnectJob(address)) }
        let executor = loop.taskExecutor
        await withTaskGroup(of: Outcome.self) { group in
            repeat {
                for job in stopJobs { group.addTask(executorPreference: executor) { await job() } }
                stopJobs = []
                guard let outcome = await group.next() else { break }
                handle(outcome)
            } while true
        }
        if let linkEvents {
            self.linkEvents = nil
            await ble.stopLinkEvents(linkEvents)
        }
    }

    /// Runs `job` on the core's job runner (while stopping: in ``stop()``'s group).
    private func run(_ job: @escaping Job) {
        if stopping { return stopJobs.append(job) }
        core?.spawn { await job() }
    }

    // MARK: GatewayAttachment

    public nonisolated func attach(_ core: AttachedCore) {
        attached.withLock { $0 = core }
    }

    public nonisolated func completed(_ outcome: any Sendable) {
        guard let outcome = outcome as? Outcome else { return }
        assumeLoopIsolated { $0.handle(outcome) }
    }

    public nonisolated func connectionSlotsChanged() {
        assumeLoopIsolated { backend in
            if backend.serving { backend.events?.connectionSlotsChanged() }
        }
    }

    /// The `bluetooth_proxy` section of `bridge/health`: the server's counters.
    public nonisolated func healthSections() -> [(key: String, value: JSONValue)] {
        guard let statistics = assumeLoopIsolated({ $0.events?.statistics }) else { return [] }
        return [("bluetooth_proxy", Self.health(statistics))]
    }

    static func health(_ statistics: APIServerStatistics) -> JSONValue {
        func number(_ value: Int) -> JSONValue { .number(Double(value)) }
        return .object([
            ("clients", number(statistics.clients)), ("accepted", number(statistics.accepted)),
            ("advertisements_sent", number(statistics.advertisementsSent)),
            ("connections", number(statistics.proxyConnections)),
            ("connects", number(statistics.proxyConnects)),
            ("connect_failures", number(statistics.proxyConnectFailures)),
            ("held_back", number(statistics.heldBack)),
            ("keys_set", number(statistics.keysSet)), ("keys_refused", number(statistics.keysRefused)),
            (
                "closed",
                .object([
                    ("max_clients", number(statistics.refusedFull)),
                    ("handshake", number(statistics.handshakeFailures)),
                    ("protocol", number(statistics.protocolErrors)),
                    ("plaintext_probe", number(statistics.plaintextProbes)),
                    ("zero_key_probe", number(statistics.zeroKeyProbes)),
                    ("password", number(statistics.passwordsRefused)),
                    ("oversize", number(statistics.oversizeFrames)),
                    ("idle", number(statistics.idleTimeouts)),
                    ("slow", number(statistics.slowClients)),
                ])
            ),
        ])
    }

    // MARK: BluetoothProxyBackend (the server's requests, on the loop thread)

    public nonisolated func reserveSlot(address: UInt64) -> Bool {
        guard let core else { return true }
        return core.reserveSlot(BluetoothAddress(rawValue: address))
    }

    public nonisolated var sharedFreeSlots: Int? { core?.freeSlots }

    public nonisolated func connect(
        address: UInt64, addressType: UInt32, done: @escaping @Sendable (Result<UInt32, ProxyFailure>) -> Void
    ) {
        assumeLoopIsolated { $0.connect(BluetoothAddress(rawValue: address), done: done) }
    }

    public nonisolated func disconnect(address: UInt64) {
        assumeLoopIsolated { $0.disconnect(BluetoothAddress(rawValue: address)) }
    }

    public nonisolated func services(
        address: UInt64, done: @escaping @Sendable (Result<[GATTServiceInfo], ProxyFailure>) -> Void
    ) {
        assumeLoopIsolated { backend in
            guard let device = backend.devices[BluetoothAddress(rawValue: address)], device.connected,
                let gatt = device.gatt
            else { return done(.failure(.notConnected)) }
            done(.success(gatt.services))
        }
    }

    public nonisolated func read(
        address: UInt64, handle: UInt16, descriptor: Bool,
        done: @escaping @Sendable (Result<[UInt8], ProxyFailure>) -> Void
    ) {
        assumeLoopIsolated { $0.read(BluetoothAddress(rawValue: address), handle, descriptor: descriptor, done: done) }
    }

    public nonisolated func write(
        address: UInt64, handle: UInt16, descriptor: Bool, data: [UInt8], withResponse: Bool,
        done: @escaping @Sendable (ProxyFailure?) -> Void
    ) {
        assumeLoopIsolated {
            $0.write(
                BluetoothAddress(rawValue: address), handle, descriptor: descriptor, data, withResponse: withResponse,
                done: done)
        }
    }

    public nonisolated func notify(
        address: UInt64, handle: UInt16, enable: Bool, done: @escaping @Sendable (ProxyFailure?) -> Void
    ) {
        assumeLoopIsolated { $0.notify(BluetoothAddress(rawValue: address), handle, enable: enable, done: done) }
    }

    public nonisolated func pair(address: UInt64, done: @escaping @Sendable (ProxyFailure?) -> Void) {
        assumeLoopIsolated { $0.pair(BluetoothAddress(rawValue: address), done: done) }
    }

    public nonisolated func unpair(address: UInt64, done: @escaping @Sendable (ProxyFailure?) -> Void) {
        assumeLoopIsolated {
            $0.forgetDevice(BluetoothAddress(rawValue: address), done: done) { $0 ? nil : .some(nil) }
        }
    }

    /// The central keeps no GATT cache apart from the device (BlueZ has no call that drops only
    /// the cache): the device is forgotten, so the next connect discovers its services afresh.
    /// Refused (ESP_GATT_WRONG_STATE) where that would do more than drop a cache: a paired device
    /// (its bond would go: unpair it instead), a device whose link is someone else's (the
    /// gateway's, another program's). One the central does not know has no cache.
    public nonisolated func clearCache(address: UInt64, done: @escaping @Sendable (ProxyFailure?) -> Void) {
        assumeLoopIsolated { backend in
            let address = BluetoothAddress(rawValue: address)
            let device = backend.devices[address]
            let linkedElsewhere =
                backend.gatewayHolds(address) || device?.adopted == true
                || (device == nil && backend.ble.isConnected(address))
            guard !linkedElsewhere else { return done(.wrongState) }
            backend.forgetDevice(address, done: done) { $0 ? .some(.wrongState) : nil }
        }
    }

    // MARK: Connections

    private func connect(_ address: BluetoothAddress, done: @escaping @Sendable (Result<UInt32, ProxyFailure>) -> Void)
    {
        // A connect to a device already connected through the proxy is answered with its link,
        // as ESPHome does ("already established"): a second connection would replace the first
        // one's GATT handles and notifications under the client.
        if let device = devices[address], device.connected, let gatt = device.gatt {
            return loop.execute { done(.success(gatt.mtu)) }
        }
        // Not while an earlier attempt for it still runs: with the server's slots this bounds the
        // jobs a client can start however fast it connects and disconnects (one disconnect per
        // device at a time). A device the central does not know (yet) is tried all the same, as
        // an ESP32 proxy tries any address: the central's connect waits for a scan to see it
        // (e.g. right after a cache clearing made BlueZ forget it), within its timeout.
        guard !connecting.contains(address) else {
            releaseSlotIfIdle(address)
            return loop.execute { done(.failure(.connectionFailed)) }
        }
        connecting.insert(address)
        let generation = nextGeneration
        nextGeneration += 1
        devices[address] = Device(generation: generation)
        let ble = self.ble
        let job: Job = {
            let result: Result<GATT, ProxyFailure>
            do throws(ProxyFailure) { result = .success(try await ble.connect(address)) } catch {
                result = .failure(error)
            }
            return .connected(address, generation: generation, result, done: done)
        }
        if disconnects[address] != nil {
            disconnects[address]?.waiting.append(WaitingConnect(job: job, done: done))
        } else {
            run(job)
        }
    }

    private func connected(
        _ address: BluetoothAddress, generation: Int, _ result: Result<GATT, ProxyFailure>,
        done: @Sendable (Result<UInt32, ProxyFailure>) -> Void
    ) {
        connecting.remove(address)
        guard var device = devices[address], device.generation == generation else {
            // Disconnected (or the client went away) meanwhile: undo what came up, unless
            // someone else holds that link.
            if case .success(let gatt) = result, !gatt.adopted, !gatewayHolds(address) { startDisconnect(address) }
            releaseSlotIfIdle(address)
            return
        }
        // The link may have dropped between the discovery and this turn (its event was ignored
        // while connecting): the attempt failed.
        var result = result
        if case .success = result, !ble.isConnected(address) { result = .failure(.connectionFailed) }
        switch result {
        case .success(let gatt):
            device.connected = true
            device.adopted = gatt.adopted
            device.gatt = gatt
            device.configurationDescriptors = gatt.configurationDescriptors
            devices[address] = device
            done(.success(gatt.mtu))
        case .failure(let failure):
            devices.removeValue(forKey: address)
            releaseSlotIfIdle(address)
            done(.failure(failure))
        }
    }

    /// Ends the client's use of the device: the link goes down unless someone else holds it — it
    /// was up before the proxy connected (the gateway's, or another program's), or the gateway
    /// connected the device meanwhile — then the slot goes back.
    private func disconnect(_ address: BluetoothAddress) {
        guard let device = devices[address] else { return }
        forget(address)
        // Also cancels a connect still running (the central fails it; its completion sees the
        // generation change).
        if !device.adopted, !gatewayHolds(address) { startDisconnect(address) }
        releaseSlotIfIdle(address)
    }

    private func disconnectJob(_ address: BluetoothAddress) -> Job {
        let ble = self.ble
        return {
            await ble.disconnect(address)
            return .disconnected(address, interrupted: Task.isCancelled)
        }
    }

    /// Disconnects (after a disconnect of the same device under way); the slot goes back once
    /// it is done, and connects that waited for it start.
    private func startDisconnect(_ address: BluetoothAddress) {
        guard disconnects[address] == nil else {
            disconnects[address]?.again = true
            return
        }
        disconnects[address] = Disconnecting()
        run(disconnectJob(address))
    }

    /// A device's disconnect ended: the next one, or what waited for it.
    private func disconnected(_ address: BluetoothAddress, interrupted: Bool) {
        // Cancelled with the core's jobs: the stop makes it again.
        guard !interrupted || stopping, let ended = disconnects.removeValue(forKey: address) else { return }
        if ended.again {
            startDisconnect(address)
            disconnects[address]?.waiting = ended.waiting
            return
        }
        for waiting in ended.waiting {
            if stopping {
                // No connect while stopping: it fails.
                connecting.remove(address)
                waiting.done(.failure(.connectionFailed))
            } else {
                run(waiting.job)
            }
        }
        releaseSlotIfIdle(address)
    }

    private func linkLost(_ address: BluetoothAddress, _ end: LinkEnd) {
        guard let device = devices[address], device.connected, !device.removing else { return }
        forget(address)
        releaseSlotIfIdle(address)
        // The HCI reason as far as BlueZ tells it (``LinkEnd``): 0x16 for a link this host ended,
        // else 0x13, the remote device terminated the connection.
        events?.connectionLost(address: address.rawValue, error: end.hciReason)
    }

    /// The shared slot goes back once nothing runs for the device here: no connection, no
    /// connect, no disconnect under way (the link is really down, or kept by the gateway). The
    /// scheduler ignores a device it holds no reservation for.
    private func releaseSlotIfIdle(_ address: BluetoothAddress) {
        guard devices[address] == nil, !connecting.contains(address), disconnects[address] == nil else { return }
        core?.releaseSlot(address)
    }

    /// Whether the gateway has (or is making) a link to the device: the proxy leaves it up.
    private func gatewayHolds(_ address: BluetoothAddress) -> Bool { core?.holdsLink(address) ?? false }

    /// Ends the device's notifications and forgets it (no call to the central beyond that).
    private func forget(_ address: BluetoothAddress) {
        guard let device = devices.removeValue(forKey: address) else { return }
        for subscription in device.notifications.values { ble.endNotifications(subscription) }
    }

    // MARK: GATT

    private func read(
        _ address: BluetoothAddress, _ handle: UInt16, descriptor: Bool,
        done: @escaping @Sendable (Result<[UInt8], ProxyFailure>) -> Void
    ) {
        guard let device = devices[address], device.connected, let gatt = device.gatt else {
            return done(.failure(.notConnected))
        }
        let ble = self.ble
        if descriptor {
            guard let target = gatt.descriptors[handle] else { return done(.failure(.invalidHandle)) }
            run {
                let result: Result<[UInt8], ProxyFailure>
                do throws(ProxyFailure) { result = .success(try await ble.read(target)) } catch {
                    result = .failure(error)
                }
                return .answered { done(result) }
            }
        } else {
            guard let target = gatt.characteristics[handle] else { return done(.failure(.invalidHandle)) }
            run {
                let result: Result<[UInt8], ProxyFailure>
                do throws(ProxyFailure) { result = .success(try await ble.read(target)) } catch {
                    result = .failure(error)
                }
                return .answered { done(result) }
            }
        }
    }

    private func write(
        _ address: BluetoothAddress, _ handle: UInt16, descriptor: Bool, _ data: [UInt8], withResponse: Bool,
        done: @escaping @Sendable (ProxyFailure?) -> Void
    ) {
        guard let device = devices[address], device.connected, let gatt = device.gatt else {
            return done(.notConnected)
        }
        let ble = self.ble
        if descriptor {
            guard let target = gatt.descriptors[handle] else { return done(.invalidHandle) }
            // The central owns the CCCD: notifications are switched with the notify request.
            guard !device.configurationDescriptors.contains(handle) else { return done(nil) }
            run {
                var failure: ProxyFailure?
                do throws(ProxyFailure) { try await ble.write(data, to: target) } catch { failure = error }
                return .answered { [failure] in done(failure) }
            }
        } else {
            guard let target = gatt.characteristics[handle] else { return done(.invalidHandle) }
            run {
                var failure: ProxyFailure?
                do throws(ProxyFailure) { try await ble.write(data, to: target, withResponse: withResponse) } catch {
                    failure = error
                }
                return .answered { [failure] in done(failure) }
            }
        }
    }

    private func notify(
        _ address: BluetoothAddress, _ handle: UInt16, enable: Bool, done: @escaping @Sendable (ProxyFailure?) -> Void
    ) {
        guard let device = devices[address], device.connected, let gatt = device.gatt else {
            return done(.notConnected)
        }
        guard let target = gatt.characteristics[handle] else { return done(.invalidHandle) }
        if !enable {
            if let subscription = devices[address]?.notifications.removeValue(forKey: handle) {
                ble.endNotifications(subscription)
            }
            return done(nil)
        }
        guard device.notifications[handle] == nil else { return done(nil) }
        let generation = device.generation
        let ble = self.ble
        run { [self] in
            let result: Result<BLE.Subscription, ProxyFailure>
            do throws(ProxyFailure) {
                result = .success(
                    try await ble.notifications(of: target) { [weak self] value in
                        // On the loop thread, as each value arrives.
                        self?.assumeLoopIsolated {
                            $0.events?.notification(address: address.rawValue, handle: handle, data: value)
                        }
                    })
            } catch {
                result = .failure(error)
            }
            return .notifying(address, generation: generation, handle: handle, result, done: done)
        }
    }

    private func notifying(
        _ address: BluetoothAddress, generation: Int, handle: UInt16, _ result: Result<BLE.Subscription, ProxyFailure>,
        done: @Sendable (ProxyFailure?) -> Void
    ) {
        switch result {
        case .success(let subscription):
            if devices[address]?.generation == generation, devices[address]?.notifications[handle] == nil {
                devices[address]?.notifications[handle] = subscription
            } else {
                ble.endNotifications(subscription)
            }
            done(nil)
        case .failure(let failure):
            done(failure)
        }
    }

    // MARK: Pairing and the cache

    /// Pairs the device this client connected (LE Just Works), as the port does it.
    private func pair(_ address: BluetoothAddress, done: @escaping @Sendable (ProxyFailure?) -> Void) {
        guard let device = devices[address], device.connected else { return done(.notConnected) }
        let ble = self.ble
        run {
            var failure: ProxyFailure?
            do throws(ProxyFailure) { try await ble.pair(address) } catch { failure = error }
            return .answered { [failure] in done(failure) }
        }
    }

    /// Asks the central for `parameters` on the link of a device this client connected, as the
    /// port does it (docs/ha-bluetooth-proxy.md, "Connection parameters").
    public nonisolated func setConnectionParameters(
        address: UInt64, parameters: ConnectionParameters, done: @escaping @Sendable (ProxyFailure?) -> Void
    ) {
        assumeLoopIsolated { backend in
            let address = BluetoothAddress(rawValue: address)
            guard let device = backend.devices[address], device.connected else { return done(.notConnected) }
            let ble = backend.ble
            backend.run {
                var failure: ProxyFailure?
                do throws(ProxyFailure) { try await ble.setConnectionParameters(parameters, for: address) } catch {
                    failure = error
                }
                return .answered { [failure] in done(failure) }
            }
        }
    }

    /// Asks the central whether the device is paired; `decide` answers with the outcome to give
    /// without removing the device (`.some`), or nil to remove it. The answer goes first; then
    /// the end of this proxy's connection to it, when the removal ended it.
    private func forgetDevice(
        _ address: BluetoothAddress, done: @escaping @Sendable (ProxyFailure?) -> Void,
        decide: @escaping @Sendable (_ paired: Bool) -> ProxyFailure??
    ) {
        // Not known to the central: nothing paired, nothing cached.
        guard ble.isKnown(address) else { return done(nil) }
        let generation = devices[address]?.generation
        if generation != nil { devices[address]?.removing = true }
        let ble = self.ble
        run {
            var failure: ProxyFailure?
            var removed = false
            do {
                if let outcome = decide(try await ble.isPaired(address)) {
                    failure = outcome
                } else {
                    try await ble.removeDevice(address)
                    removed = true
                }
            } catch {
                failure = .connectionFailed
            }
            return .forgot(address, generation: generation, removed: removed, failure: failure, done: done)
        }
    }

    private func forgot(
        _ address: BluetoothAddress, generation: Int?, removed: Bool, failure: ProxyFailure?,
        done: @Sendable (ProxyFailure?) -> Void
    ) {
        done(failure)
        guard let generation, devices[address]?.generation == generation else { return }
        if ble.isConnected(address) {
            devices[address]?.removing = false
        } else {
            forget(address)
            releaseSlotIfIdle(address)
            // 0x16: the connection terminated by the local host.
            events?.connectionLost(address: address.rawValue, error: removed ? 0x16 : 0x13)
        }
    }

    // MARK: Outcomes

    private func handle(_ outcome: Outcome) {
        switch outcome {
        case .connected(let address, let generation, let result, let done):
            connected(address, generation: generation, result, done: done)
        case .disconnected(let address, let interrupted):
            disconnected(address, interrupted: interrupted)
        case .answered(let answer):
            answer()
        case .notifying(let address, let generation, let handle, let result, let done):
            notifying(address, generation: generation, handle: handle, result, done: done)
        case .forgot(let address, let generation, let removed, let failure, let done):
            forgot(address, generation: generation, removed: removed, failure: failure, done: done)
        }
    }
}
