import Bluetooth
import EventLoop
import FIFOQueue
import JSON
import Parsers
import Retry

/// The gateway core (docs/architecture.md): scans, matches device rules, connects, subscribes
/// and polls, decodes, publishes state with rate control, runs commands through one queue per
/// device, and keeps availability, Home Assistant discovery and the bridge topics — all through
/// ports (``BLEPort``, ``MQTTPort``, ``PeripheralPort``, ``GatewayClock``), so every behaviour is
/// testable with in-memory ports and a manual clock.
///
/// Execution model: an actor whose executor is the ``EventLoop`` that also runs D-Bus and MQTT.
/// Every input — an advertisement, a notification, a link change, an MQTT message, the timer, a
/// job's completion — is an event handled to completion, one at a time, by synchronous code:
/// nothing in the core suspends between reading and writing its state. Ports deliver on the loop
/// thread and the event is handled right there (no hop); from another thread it is queued to the
/// loop. Long operations (connect, GATT, peripheral port calls) are jobs: child tasks of
/// ``run()``, on the loop, whose results come back as events.
///
/// The gateway routes; each feature owns its state: ``DeviceRegistry`` (identities, names,
/// eviction), ``DeviceStates`` (readings, rate control, runtime bind keys), ``Availability``,
/// ``ConnectionManager``, ``CommandRunner``, ``BridgePublisher``, ``HomeAssistantPublisher``,
/// ``PeripheralBridge``, ``HealthReporter``, ``Fleet``, the timer (``CoreTimer``) and the
/// ``StoreAndForward`` stage behind ``Output``.
///
/// Life cycle: ``start()`` publishes the bridge topics, subscribes to the command topics and
/// starts scanning and the timer; ``run()`` runs the jobs until its task is cancelled;
/// ``stop()`` ends everything and publishes `bridge/state` offline (waiting a bounded time for
/// delivery) — call it before disconnecting MQTT. The `handle` methods and ``tick()`` put an
/// input in directly (tests, fuzz targets).
public actor Gateway: LoopIsolated {
    /// The loop whose thread runs the core.
    public nonisolated let loop: EventLoop
    public nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }

    let context: CoreContext
    let registry: DeviceRegistry
    let states: DeviceStates
    /// The readings of the last hours, for the web page's charts (``ReadingHistory``).
    let history = ReadingHistory()
    let availability: Availability
    let connections: ConnectionManager
    private let commands: CommandRunner
    private let bridge: BridgePublisher
    let homeAssistant: HomeAssistantPublisher
    /// The peripheral role (nil: central only, whatever `role` says).
    private let peripheralBridge: PeripheralBridge?
    /// Fleet mode (nil: off): one owner per device among the gateways of the base topic.
    let fleet: Fleet?
    private let health: HealthReporter
    /// The pairing agent's questions and the pair requests.
    private let pairing: PairingRequests
    /// The feature outside the core that shares its slots and jobs (the Bluetooth proxy's backend).
    private let attachment: (any GatewayAttachment)?
    /// What the radio hears (``RadioView``) and the raw radio on MQTT; nil unless
    /// `mqtt.raw_advertisements` or the `radioView` of ``init`` asks for it.
    private let radio: RawRadio?
    /// The scan without `scan.services` the page's radio view adds while it listens (the main
    /// scan keeps the filter; this one hands the core only what the filter kept out), and
    /// whether it is being started.
    private var radioScan: PortRegistration?
    private var radioScanStarting = false
    /// The presence identities and their matcher (nil: no `presence` section, nothing built).
    let presence: Presence?

    private var started = false
    private var runningJobs = false
    private var registrations: [PortRegistration] = []
    /// Events that arrived while one was being handled (a port called back from inside a call
    /// the core made): handled right after it, in order.
    private var deferred = FIFO<CoreEvent>()
    private var dispatching = false
    private var idleWaiters: [CheckedContinuation<Void, Never>] = []

    private var config: GatewayConfig { context.config }
    private var clock: any GatewayClock { context.clock }
    private var log: GatewayLogger { context.log }
    private var ble: any BLEPort { context.ble }
    private var mqtt: any MQTTPort { context.output.mqtt }

    /// - Parameters:
    ///   - loop: the event loop the core runs on (the one of the ports' C libraries).
    ///   - reconnect: makes the per-device reconnect rule (the central's policy, adapted).
    ///   - logger: where log lines go; ``GatewayConfig/secrets`` are redacted before they reach it.
    ///   - version: reported on `bridge/info`.
    ///   - stateDirectory: where the store-and-forward queue file (`outbox.log`) and the runtime
    ///     bind keys (`bindkeys.json`) live, e.g. from `--state-dir`; overrides `state_directory`
    ///     of config.json; with neither both are kept in memory only.
    ///   - processSample: RSS and CPU time for `bridge/health` (default: `/proc/self`).
    ///   - peripheral: the peripheral role (used when `role` is peripheral or both).
    ///   - healthExtra: sections appended to `bridge/health` (called on the loop).
    ///   - attachment: a feature outside the core that shares its connection slots and jobs (the
    ///     Bluetooth proxy's backend); given its ``AttachedCore`` before this returns, its health
    ///     sections appended to `bridge/health`.
    public init(
        config: GatewayConfig, ble: any BLEPort, peripheral: (any PeripheralPort)? = nil, mqtt: any MQTTPort,
        clock: any GatewayClock, loop: EventLoop,
        reconnect: @escaping @Sendable () -> any ReconnectStrategy = { ReconnectPolicy<SystemRandomNumberGenerator>() },
        logger: GatewayLogger = .none,
        version: String = "dev", stateDirectory: String? = nil,
        processSample: @escaping @Sendable () -> ProcessSample? = { ProcessSample.current() },
        healthExtra: (@Sendable () -> [(key: String, value: JSONValue)])? = nil,
        attachment: (any GatewayAttachment)? = nil,
        adapterObserver: (@Sendable (BLEAdapterStatus) -> Void)? = nil,
        radioView: Bool = false
    ) {
        self.loop = loop
        // Each feature is given what it asks of the others when it is made; the gateway itself,
        // which only exists once they do, is reached through the inbox.
        let inbox = CoreInbox()
        let context = CoreContext(
            config: config, stateDirectory: stateDirectory ?? config.stateDirectory, clock: clock,
            log: logger.redacting(config.secrets), ble: ble, output: Output(mqtt: mqtt, qos: config.mqtt.qos),
            loop: loop, inbox: inbox)
        self.context = context
        let fleet = config.fleet.enabled ? Fleet(context: context, now: clock.now()) : nil
        self.fleet = fleet
        presence = config.presence.map { Presence(settings: $0, directory: context.stateDirectory) }
        let registry = DeviceRegistry(context: context)
        self.registry = registry
        let states = DeviceStates(context: context)
        self.states = states
        availability = Availability(context: context, fleet: fleet)
        let connections = ConnectionManager(context: context, reconnect: reconnect)
        self.connections = connections
        commands = CommandRunner(
            context: context, registry: registry, states: states, connections: connections, fleet: fleet)
        let bridge = BridgePublisher(
            context: context, version: version, registry: registry, connections: connections, states: states,
            adapterObserver: adapterObserver)
        self.bridge = bridge
        pairing = PairingRequests(context: context, registry: registry)
        homeAssistant = HomeAssistantPublisher(context: context, version: version)
        let peripheralBridge = peripheral.map { PeripheralBridge(context: context, port: $0) }
        self.peripheralBridge = peripheralBridge
        var extra = healthExtra
        if let attachment {
            extra = { (healthExtra?() ?? []) + attachment.healthSections() }
            connections.observeSlots(initially: false) { _ in attachment.connectionSlotsChanged() }
        }
        let radio =
            radioView || config.mqtt.rawAdvertisements.enabled ? RawRadio(context: context, states: states) : nil
        self.radio = radio
        health = HealthReporter(
            context: context, processSample: processSample, extra: extra, registry: registry,
            connections: connections, bridge: bridge, peripheral: peripheralBridge, fleet: fleet, radio: radio,
            presence: presence)
        self.attachment = attachment
        inbox.gateway = self
        attachment?.attach(AttachedCore(self))
    }

    /// The last will to configure on the MQTT client before it connects: `<base>/bridge/state`
    /// `{"state":"offline"}`, retained.
    public static func lastWill(for config: GatewayConfig) -> MQTTOutboundMessage {
        MQTTOutboundMessage(
            topic: config.bridgeTopic + "/state", payload: Array(#"{"state":"offline"}"#.utf8),
            qos: config.mqtt.qos, retain: true)
    }

    /// The topic filters the gateway subscribes to (with Home Assistant discovery on, also
    /// `homeassistant/status`).
    public static func subscriptions(for config: GatewayConfig) -> [String] {
        let base = config.mqtt.baseTopic
        var filters = [base + "/+/set", base + "/+/set/+", base + "/+/get", config.bridgeTopic + "/request/#"]
        if config.homeAssistant.enabled { filters.append(config.homeAssistant.statusTopic) }
        if config.fleet.enabled { filters += Fleet.subscriptions(base: base) }
        return filters
    }

    /// The file name of the store-and-forward queue in the state directory.
    public static let queueFileName = "outbox.log"

    /// The file name of the bind keys set at run time in the state directory (mode 0600).
    public static let bindKeysFileName = "bindkeys.json"

    /// How long ``stop(timeout:)`` waits at most for `bridge/state` offline to be acknowledged.
    public static let offlinePublishTimeout = 2.0

    /// How long ``stop(timeout:)`` waits at most by default for what is outside the process:
    /// BlueZ ending the links (its Disconnect answers after its 2 s disconnect timer) and, at the
    /// same time, the broker acknowledging `bridge/state` offline (at most
    /// ``offlinePublishTimeout`` of it).
    public static let stopTimeout = 3.0

    // MARK: Life cycle

    /// Opens the store-and-forward queue (replaying what a previous run left), publishes the
    /// bridge topics and discovery, subscribes to commands, starts scanning and the timer.
    /// Throws ``StoreAndForwardError`` when the queue file cannot be opened at all (a setup
    /// mistake: a full or read-only state directory is an episode of the queue instead),
    /// ``GatewayStartError`` when the peripheral port refuses the configured services, and
    /// ``BLEPortError`` when scanning cannot start.
    public func start() async throws {
        guard !started else { return }
        if config.storeAndForward.enabled, context.output.outbox == nil {
            let outbox = try StoreAndForward(context: context)
            context.output.outbox = outbox
            outbox.checkFile()  // a state directory full or read-only at start
        }
        states.loadBindKeys()
        if let presence {
            for problem in presence.load() { log(.warning, "presence: \(problem)") }
            if !presence.runtime.isEmpty {
                log(
                    .info, "presence: \(presence.runtime.count) identities set at run time, from \(presence.path ?? "")"
                )
            }
        }
        started = true
        let deliver = context.deliver
        context.timer.start { deliver(.timer) }
        health.start(now: clock.now())
        log(.debug, "configuration: \(config.mqtt), \(config.devices.count) device rules")
        dispatch {
            $0.context.output.outbox?.connectionChanged(true)
            $0.bridge.publishOnline()
            $0.homeAssistant.publishBridge()
        }
        for filter in Self.subscriptions(for: config) {
            registrations.append(try mqtt.subscribe(filter) { deliver(.command($0)) })
        }
        mqtt.connectionEvents { deliver(.mqttConnection($0)) }
        registrations.append(await ble.connectionEvents { deliver(.link($0)) })
        if config.role.includesCentral {
            registrations.append(await ble.pairingAgent { deliver(.pairing($0)) })
        }
        // The peripheral role first: its source topics are subscribed before the central's scan
        // can publish a reading, so a `from_topic` that names the gateway's own state topic (role
        // both) has the first reading too (with the kernel's reports it comes within moments).
        if config.role.includesPeripheral, let peripheralBridge {
            peripheralBridge.port.events { deliver(.peripheral($0)) }
            try await peripheralBridge.start()
            for topic in config.peripheral.sourceTopics {
                registrations.append(try mqtt.subscribe(topic) { deliver(.peripheralSource($0)) })
            }
        }
        if config.role.includesCentral {
            // With the raw radio on MQTT, the scan is not filtered by services below the core
            // (BlueZ's discovery filter, the central's check): the core filters, and so sees and
            // publishes what it filters. The page's view adds an unfiltered scan only while it
            // listens (``demandRadioView()``).
            let unfiltered = config.mqtt.rawAdvertisements.enabled
            registrations.append(
                try await ble.scan(services: unfiltered ? [] : config.bluetooth.scanServices, raw: radio != nil) {
                    deliver(.advertisement($0))
                })
            // State restoration: the devices the previous run was connected to connect now,
            // without waiting for an advertisement (a connected peripheral may advertise
            // rarely or not at all), whatever the link is for (subscribe, poll, commands).
            let restored = await ble.restoredDevices()
            for discovery in restored {
                connectAtOnce(discovery, because: "connected in the previous run: reconnecting now")
            }
            // What no rule asks for now is not restored again.
            var wanted: [BluetoothAddress: [CharacteristicSpec]] = [:]
            for discovery in restored {
                if let id = registry.id(discovery.address), registry.rule(id).connect {
                    wanted[discovery.address] = registry.rule(id).subscribe
                }
            }
            await ble.keepRestored(devices: Set(wanted.keys)) { [wanted] address, characteristic in
                wanted[address]?.contains { $0.matches(characteristic) } == true
            }
        }
        context.timer.arm(min(clock.now() + 3600, health.nextDeadline ?? .infinity))
        log(
            .notice,
            "gateway started (role \(config.role.rawValue)): \(config.devices.count) device rules, base topic \(context.base)"
        )
    }

    /// Runs the core's jobs (connects, GATT operations, peripheral port calls) as child tasks on
    /// the loop until the calling task is cancelled; then cancels those still running and
    /// returns once they ended. Call after ``start()``, once; call ``stop()`` after it returns.
    /// Jobs started before it runs wait for it.
    public func run() async {
        guard !runningJobs else { return }
        runningJobs = true
        let jobs = context.jobs.stream
        let executor = loop.taskExecutor
        // The loop as task executor for the whole loop below, so the stream's own nonisolated
        // code resumes there too (not on a pool thread that would then hop back).
        await withTaskExecutorPreference(executor) {
            await withDiscardingTaskGroup { group in
                for await job in jobs {
                    group.addTask(executorPreference: executor) { [self] in receive(.completed(await job())) }
                }
                group.cancelAll()
            }
        }
    }

    /// Stops the gateway, waiting at most `timeout` seconds (by the core's clock) for anything
    /// outside the process (docs/operations.md, "Stopping"):
    ///
    /// 1. Scanning, notification subscriptions (their registrations end: an `AcquireNotify`
    ///    socket is closed, a `StartNotify` is stopped), MQTT subscriptions, timers and jobs end.
    /// 2. At the same time: the links the gateway has or is making are disconnected, all at once
    ///    (BlueZ answers each Disconnect after its 2 s disconnect timer), and `bridge/state`
    ///    offline is published, waiting at most ``offlinePublishTimeout`` for its
    ///    acknowledgement when MQTT is connected (when it is not, the broker has published the
    ///    last will already; the message is handed to the client without waiting). When
    ///    `timeout` passes first, what is still waited for is cancelled: a link whose Disconnect
    ///    did not finish is left to BlueZ (the next start adopts it if it is still up).
    /// 3. Once the offline wait is over (while the links may still be ending), the
    ///    store-and-forward stage writes what lives only in memory to its queue file: the stored
    ///    messages the broker has not acknowledged, ahead of the queue (``StoreAndForward/stop()``).
    ///
    /// Call it after the task running ``run()`` has ended, and before disconnecting MQTT. The
    /// ports must honour task cancellation (``BLEPort``) for the bound to hold.
    public func stop(timeout: Double = Gateway.stopTimeout) async {
        guard started else { return }
        started = false
        // What the next start restores (the links up now) is saved before they end.
        await ble.keepStateForRestart()
        let start = clock.now()
        let deadline = start + max(0, timeout)
        for registration in registrations { registration.cancel() }
        registrations = []
        radioScan?.cancel()
        radioScan = nil
        context.timer.stop()
        pairing.stop()
        let outbox = context.output.outbox
        outbox?.stopTimers()
        context.jobs.close()
        let links = connections.stop()
        let ble = self.ble
        let mqtt = self.mqtt
        let clock = self.clock
        let executor = loop.taskExecutor
        fleet?.leave(now: start)
        let offline = Self.lastWill(for: config)
        let waitForOffline = context.output.connected
        if !waitForOffline { mqtt.publish(offline) }
        let offlineDeadline = min(deadline, start + Self.offlinePublishTimeout)
        // Every task below runs on the loop (no thread hops; tests see it settle).
        let (ended, delivered) = await withTaskExecutorPreference(executor) {
            async let linksEnded = try? withDeadline(deadline, clock: clock) {
                await withDiscardingTaskGroup { group in
                    for address in links { group.addTask { await ble.disconnect(address) } }
                }
                return true
            }
            let delivered =
                waitForOffline
                ? try? await withDeadline(offlineDeadline, clock: clock) { await mqtt.publishAndWait(offline) } : nil
            // After the offline wait (what the broker acknowledged meanwhile is not written),
            // while the links may still be ending.
            outbox?.stop()
            return (await linksEnded, delivered)
        }
        let offlineText: String
        switch (waitForOffline, delivered) {
        case (false, _): offlineText = "bridge/state offline handed to the MQTT client without waiting (not connected)"
        case (true, true?): offlineText = "bridge/state offline acknowledged"
        case (true, false?): offlineText = "bridge/state offline not delivered"
        case (true, nil):
            offlineText = "bridge/state offline not acknowledged within \(Self.tenths(offlineDeadline - start)) s"
        }
        let linkCount = links.count == 1 ? "1 link" : "\(links.count) links"
        let linksText =
            links.isEmpty
            ? "no links to end"
            : ended == nil
                ? "\(linkCount): Disconnect not answered within \(Self.tenths(deadline - start)) s, cancelled (left to BlueZ)"
                : "\(linkCount) disconnected"
        log(.notice, "gateway stopped in \(Self.tenths(clock.now() - start)) s: \(offlineText); \(linksText)")
    }

    /// Seconds rounded to a tenth, for log lines.
    private static func tenths(_ seconds: Double) -> Double { (seconds * 10).rounded() / 10 }

    /// Waits until no job runs and no command is queued or waiting (tests, shutdown).
    public func waitUntilIdle() async {
        while !isIdle {
            await withCheckedContinuation { idleWaiters.append($0) }
        }
    }

    private var isIdle: Bool { context.jobs.inFlight == 0 && commands.isIdle }

    /// Whether the device has a link (or one in the making) or a command queued or running: it
    /// is not forgotten then.
    private func isBusy(_ address: BluetoothAddress) -> Bool {
        connections.phase(address) != .idle || commands.isBusy(address)
    }

    // MARK: Events

    /// Hands an event to the core: handled at once on the loop thread, else queued to the loop.
    nonisolated func receive(_ event: CoreEvent) {
        if loop.inLoop {
            assumeLoopIsolated { $0.dispatch(event) }
        } else {
            loop.execute { [self] in assumeLoopIsolated { $0.dispatch(event) } }
        }
    }

    /// Handles `event` to completion, then what arrived meanwhile; then re-arms the timer for
    /// what became due.
    private func dispatch(_ event: CoreEvent) {
        if dispatching {
            deferred.append(event)
            return
        }
        dispatching = true
        handle(event)
        handleDeferred()
        dispatching = false
        settled()
    }

    /// Runs `body` as one event (for inputs that are not ``CoreEvent``s: start, the public
    /// `handle` methods), then what arrived meanwhile.
    private func dispatch(_ body: (isolated Gateway) -> Void) {
        guard !dispatching else { return body(self) }
        dispatching = true
        body(self)
        handleDeferred()
        dispatching = false
        settled()
    }

    /// Handles the events that arrived while one was being handled, in order (and those they bring).
    private func handleDeferred() {
        while let event = deferred.popFirst() { handle(event) }
    }

    /// After an event: the timer covers what became due; the slots observer hears a change of
    /// the free connection slots; idle waiters go on when idle.
    private func settled() {
        context.timer.settle()
        connections.notifySlots()
        if !idleWaiters.isEmpty, isIdle {
            let waiters = idleWaiters
            idleWaiters = []
            for waiter in waiters { waiter.resume() }
        }
    }

    private func handle(_ event: CoreEvent) {
        if case .completed(let completion) = event {
            context.jobs.finished()
            return completed(completion)
        }
        if case .liveCompleted(let sequence) = event {
            // Also while stopping: the broker acknowledged it while bridge/state offline was awaited.
            context.output.outbox?.liveCompleted(sequence)
            return
        }
        guard started else { return }
        switch event {
        case .advertisement(let discovery): advertisement(discovery)
        case .notification(let address, let spec, let value, let mtu):
            notification(address, spec: spec, value: value, mtu: mtu)
        case .link(let change): link(change)
        case .command(let message): route(message)
        case .peripheralSource(let message): peripheralBridge?.source(message)
        case .mqttConnection(let connected): mqttConnection(connected)
        case .peripheral(let change): peripheralBridge?.event(change)
        case .pairing(let event): pairing.event(event, now: clock.now())
        case .timer: timerFired()
        case .replayed(let results): context.output.outbox?.replayed(results)
        case .replayRetry: context.output.outbox?.retryDue()
        case .queueFileRetry: context.output.outbox?.retryFile()
        case .completed, .liveCompleted: break
        }
    }

    /// One advertisement report (the public entry point; ports deliver through ``receive(_:)``).
    public func handle(_ discovery: BLEDiscovery) { dispatch(.advertisement(discovery)) }

    /// A message on a command topic or the Home Assistant status topic.
    public func handle(_ message: MQTTInboundMessage) { dispatch(.command(message)) }

    /// A link came up or went down.
    public func handle(_ event: BLEConnectionEvent) { dispatch(.link(event)) }

    /// The MQTT connection changed: the store-and-forward stage switches mode; after a
    /// reconnect the retained topics and discovery are published again (behind any replay).
    public func handle(mqttConnected connected: Bool) { dispatch(.mqttConnection(connected)) }

    /// A message on a peripheral `from_topic`.
    public func handle(peripheralSource message: MQTTInboundMessage) { dispatch(.peripheralSource(message)) }

    /// A central wrote to or (un)subscribed from a served characteristic.
    public func handle(_ event: PeripheralPortEvent) { dispatch(.peripheral(event)) }

    /// Runs everything that is due at the clock's current time (what the timer does).
    public func tick() { dispatch(.timer) }

    // MARK: Connection slots shared with the Bluetooth proxy

    /// Takes one of the gateway's connection slots (`bluetooth.max_connections`) for a link that
    /// another user of the adapter — the Bluetooth proxy (docs/ha-bluetooth-proxy.md) — makes to
    /// `address`: at once or not at all, never queued. True when a slot is free, or when the
    /// gateway itself has (or is making) a link to the device: that link's slot is shared. False
    /// when the gateway's links and the other reservations take every slot. Give it back with
    /// ``releaseConnectionSlot(for:)`` once the link is over; a device the gateway asks for
    /// meanwhile shares the reserved slot. Call on the loop (`assumeLoopIsolated`); handled as
    /// one event.
    public func reserveConnectionSlot(for address: BluetoothAddress) -> Bool {
        var granted = false
        dispatch { granted = $0.connections.reserveSlot(address) }
        return granted
    }

    /// The other user's link to `address` is over: the slot goes to the next device waiting
    /// for one (unless the gateway's own link to the device keeps it).
    public func releaseConnectionSlot(for address: BluetoothAddress) {
        dispatch { $0.connections.releaseSlot(address) }
    }

    /// Connection slots free now: `bluetooth.max_connections` less the gateway's links
    /// (connecting or connected) and the reserved ones, a device held by both counted once.
    public var freeConnectionSlots: Int { connections.freeSlots }

    /// Whether the gateway has a link to the device or is making one: another user of the
    /// link leaves it up when it is done.
    public func holdsLink(to address: BluetoothAddress) -> Bool { connections.holdsLink(address) }

    /// The adapter's condition as the BLE port last told it (nil before ``start()``).
    public var adapterStatus: BLEAdapterStatus? { bridge.adapter }

    // MARK: The radio's view

    /// What the radio hears (nil: the view is off — neither `mqtt.raw_advertisements` nor
    /// `radioView` of ``init``). Read it on the loop (`assumeLoopIsolated`).
    public var radioView: RadioView? { radio?.view }

    /// The page wants the radio's view: it listens (notes every report) for the next minute
    /// (``RawRadio/demandSpan``), and — when `scan.services` filters the scan and the raw radio
    /// on MQTT is off — an unfiltered scan is added for as long, handing the core only the
    /// reports the filter keeps out, so that the view shows them as `filtered_by_scan_services`.
    /// (On the D-Bus path this widens bluetoothd's discovery filter while it lasts.) Nothing
    /// when the view is off. Call it on the loop.
    public func demandRadioView() {
        guard let radio else { return }
        radio.demand(now: clock.now())
        let services = config.bluetooth.scanServices
        guard started, config.role.includesCentral, !services.isEmpty, !config.mqtt.rawAdvertisements.enabled,
            radioScan == nil, !radioScanStarting
        else { return }
        radioScanStarting = true
        let deliver = context.deliver
        let ble = self.ble
        let log = self.log
        context.jobs.spawn {
            do {
                return .radioScan(
                    try await ble.scan(services: [], raw: true) { discovery in
                        // The main scan hands the core the rest: each report reaches it once.
                        guard !services.contains(where: { discovery.advertisement.advertises($0) }) else { return }
                        deliver(.advertisement(discovery))
                    })
            } catch {
                log(.warning, "radio view: the unfiltered scan could not start: \(error)")
                return .radioScan(nil)
            }
        }
    }

    private func radioScanStarted(_ registration: PortRegistration?) {
        radioScanStarting = false
        guard let registration else { return }
        guard started, let radio, radio.listening(now: clock.now()) else {
            registration.cancel()
            return
        }
        radioScan = registration
        log(.info, "radio view: scanning without scan.services while the page shows the radio")
    }

    /// Ends the unfiltered scan of ``demandRadioView()`` once the view stopped listening.
    private func endRadioScan() {
        radioScan?.cancel()
        radioScan = nil
        log(.info, "radio view: the page no longer shows the radio; scanning with scan.services again")
    }

    /// The addresses heard within the view's window that changed after `since` (0: all), the
    /// most recent first; nil when the view is off.
    public func radioSnapshot(since: UInt64 = 0) -> RadioSnapshot? {
        radio?.view.snapshot(now: clock.now(), since: since)
    }

    /// Calls `handler` on the loop with each entry a report changed (it must not block); nil
    /// when the view is off. End with ``stopObservingRadio(_:)``.
    public func observeRadio(_ handler: @escaping @Sendable (RadioEntry) -> Void) -> Int? {
        radio?.view.observe(handler)
    }

    public func stopObservingRadio(_ token: Int) { radio?.view.stopObserving(token) }

    /// The config.json device rule that would publish `address` (``RuleSuggestion``), when the
    /// view holds it and a rule would help.
    public func suggestedRule(for address: BluetoothAddress) -> RuleSuggestion? {
        guard let entry = radio?.view.entry(address) else { return nil }
        return RuleSuggestion.suggest(for: entry, config: config)
    }

    /// `handler` gets ``freeConnectionSlots`` now and after each event that changed it (a link of
    /// the gateway's starting or ending, a reservation), on the loop. It must not call back into
    /// the gateway's reservations from inside (it may read ``freeConnectionSlots``).
    public func observeConnectionSlots(_ handler: @escaping @Sendable (Int) -> Void) {
        connections.observeSlots(handler)
    }

    /// A job of the attachment (``AttachedCore/spawn(_:)``) on the core's job runner.
    func spawnAttachmentJob(_ job: @escaping @Sendable () async -> any Sendable) {
        context.jobs.spawn { .attachment(AttachmentOutcome(await job())) }
    }

    // MARK: Advertisements and values

    /// One advertisement report: the hot path. Filters on the scan services and RSSI threshold,
    /// finds (or registers) the device, updates RSSI/last seen/availability, decodes the payload
    /// and publishes through rate control. While the radio's view listens, what became of it is
    /// noted there (nothing more is done otherwise).
    private func advertisement(_ discovery: BLEDiscovery) {
        let (outcome, id, sighted) = handleAdvertisement(discovery)
        guard let radio else { return }
        // The clock's reading the core took for this report (a device's), so that the view does
        // not read it again (~540 instructions a report); NaN when it took none.
        guard let now = radio.listeningTime(sighted: sighted.isNaN ? nil : sighted) else {
            if radioScan != nil { endRadioScan() }
            return
        }
        let refined =
            outcome == .noRule && registry.ruleIndex(matching: discovery) != nil ? RadioOutcome.registryFull : outcome
        radio.heard(discovery, outcome: refined, now: now) {
            guard let id else { return nil }
            let format: String? =
                switch outcome {
                case .decoded, .noValues, .repeatedFrame, .otherOwner: states.format(id)
                default: nil
                }
            return (registry[id].name, format)
        }
    }

    /// ``advertisement(_:)``'s work: what became of the report, the device it concerned, and
    /// the clock's time it read for it (NaN when it read none: no device). Inlined, so that with
    /// the view off the hot path is one function as before, its result unused.
    @inline(__always)
    private func handleAdvertisement(_ discovery: BLEDiscovery) -> (RadioOutcome, DeviceID?, Double) {
        context.counters.advertisements += 1
        let advertisement = discovery.advertisement
        let bluetooth = config.bluetooth
        if let threshold = bluetooth.rssiThreshold, let rssi = advertisement.rssi, Int(rssi) < threshold {
            context.counters.dropped.filtered += 1
            return (.belowRSSIThreshold, nil, .nan)
        }
        if let presence, presenceHeard(presence, discovery) { return (.presence, nil, .nan) }
        if !bluetooth.scanServices.isEmpty, !bluetooth.scanServices.contains(where: { advertisement.advertises($0) }) {
            context.counters.dropped.filtered += 1
            return (.filteredByServices, nil, .nan)
        }
        guard let id = registry.id(discovery.address) ?? register(discovery) else { return (.noRule, nil, .nan) }
        let now = clock.now()
        registry.sighted(id, advertisement, now: now, wall: clock.wallMilliseconds())
        let device = registry[id]
        let rule = registry.rule(id)
        fleet?.heard(discovery.address, rssi: advertisement.rssi, rule: rule, now: now)
        if !rule.connect {
            availability.advertised(id, device, rule: rule, now: now)
        } else {
            connections.heard(device.address)
        }
        if connections.awaitsConnection(device.address, rule: rule), fleet.owns(device.address) {
            connections.request(device.address, ruleIndex: device.ruleIndex, urgent: false)
        }
        guard rule.advertisements else { return (.advertisementsOff, id, now) }
        guard !advertisement.serviceData.isEmpty || !advertisement.manufacturerData.isEmpty else {
            return (.noPayload, id, now)
        }
        guard
            let readings = states.decode(
                id, advertisement, address: discovery.address, adapter: discovery.adapter, rule: rule,
                name: device.name)
        else { return (states.outcome, id, now) }
        if let fleet, !fleet.decoded(discovery.address, readings, now: now) {
            _ = states.merge(id, readings)
            return (.otherOwner, id, now)
        }
        apply(readings, to: id, now: now)
        return (.decoded, id, now)
    }

    /// A value of a subscribed characteristic.
    private func notification(_ address: BluetoothAddress, spec: Int, value: [UInt8], mtu: Int?) {
        context.counters.notifications += 1
        guard let id = registry.id(address), connections.accepts(address) else { return }
        characteristicValue(id, poll: false, spec: spec, value: value, mtu: mtu)
    }

    /// A characteristic value from a notification or read: decoded with the configured parser
    /// and published (forced for `/get`, so the state is republished).
    private func characteristicValue(
        _ id: DeviceID, poll: Bool, spec index: Int, value: [UInt8], force: Bool = false, mtu: Int? = nil
    ) {
        let device = registry[id]
        let rule = registry.rule(id)
        let specs = poll ? rule.poll : rule.subscribe
        guard specs.indices.contains(index),
            let readings = states.decode(
                id, value: value, spec: specs[index], poll: poll, index: index, name: device.name, mtu: mtu)
        else { return }
        let now = clock.now()
        registry.heard(id, now: now, wall: clock.wallMilliseconds())
        apply(readings, to: id, now: now, force: force)
    }

    /// Merges readings into the device's state and publishes it when rate control allows. A new
    /// attribute gets its Home Assistant config first, and the state messages wait
    /// `state_delay` (all of them, in order: none is merged away).
    private func apply(_ readings: [Reading], to id: DeviceID, now: Double, force: Bool = false) {
        history.record(id, readings, wall: Double(clock.wallMilliseconds()) / 1000)
        guard fleet.owns(registry[id].address) else {
            _ = states.merge(id, readings)
            return
        }
        if states.merge(id, readings), homeAssistant.enabled { publishDiscovery(id) }
        states.offer(id, registry[id], rule: registry.rule(id), now: now, force: force)
    }

    // MARK: Devices

    /// Finds the first rule matching the device and registers it, making room when the registry
    /// is full (``DeviceRegistry/room(for:)``); nil when no rule matches or the registry is full
    /// of devices that stay.
    private func register(_ discovery: BLEDiscovery) -> DeviceID? {
        guard let ruleIndex = registry.ruleIndex(matching: discovery) else { return nil }
        switch registry.room(for: discovery.address, busy: { isBusy($0) }) {
        case .free: break
        case .forget(let oldest): removeDevice(oldest)
        case .full: return nil
        }
        let id = register(discovery.address, ruleIndex: ruleIndex, advertisement: discovery.advertisement)
        let device = registry[id]
        log(.info, "device \(device.name) (\(discovery.address)) matched devices[\(ruleIndex)]")
        bridge.event("device_seen", device)
        if registry.rule(id).connect { availability.publish(id, device, online: false) }
        return id
    }

    /// Registers a device under `ruleIndex` (also one a rule names by address before it was seen).
    private func register(_ address: BluetoothAddress, ruleIndex: Int, advertisement: AdvertisementData? = nil)
        -> DeviceID
    {
        let rule = context.rule(ruleIndex)
        let name = rule.name ?? DeviceRecord.defaultName(address)
        let id = registry.add(
            address, name: name, stateTopic: context.base + "/" + name, ruleIndex: ruleIndex, now: clock.now(),
            advertisement: advertisement)
        states.added(id)
        availability.added(id)
        homeAssistant.added(id)
        bridge.devicesChanged()
        if homeAssistant.enabled, !rule.commands.isEmpty { publishDiscovery(id) }
        return id
    }

    /// The device a topic level names: a known device, else a rule's friendly name or an
    /// address a rule names (registered now, so a command can connect to a device not seen yet).
    private func device(named name: String) -> DeviceID? {
        if let id = registry.id(named: name) { return id }
        guard let (address, ruleIndex) = registry.rule(naming: name) else { return nil }
        return registry.id(address) ?? register(address, ruleIndex: ruleIndex)
    }

    /// Removes a device: its link ends, its Home Assistant configs, retained availability and
    /// retained state are cleared (empty retained payloads), `bridge/event` says
    /// `device_removed` and `bridge/devices` is republished. A device that advertises again is
    /// registered again.
    private func removeDevice(_ id: DeviceID) {
        let device = registry[id]
        connections.removed(device.address)
        bridge.event("device_removed", device)
        homeAssistant.removed(id)
        availability.removed(id, device)
        states.removed(id, device, rule: registry.rule(id))
        history.removed(id)
        context.deviceEvents?.removed(id.index, device: device.name)
        registry.remove(id)
        context.counters.devicesRemoved += 1
        bridge.devicesChanged()
        commands.removed(device.address, name: device.name)
    }

    // MARK: Home Assistant

    /// Publishes the device's configs — only those not published yet, unless `all` — and holds
    /// its state back for `homeassistant.state_delay` when a config was new or, with `hold`,
    /// when all were republished.
    private func publishDiscovery(_ id: DeviceID, all: Bool = false, hold: Bool = true) {
        let device = registry[id]
        guard fleet.owns(device.address) else { return }
        let fresh = homeAssistant.publish(
            id,
            HomeAssistantDiscovery.Device(
                address: device.address, name: device.name, localName: device.localName, format: states.format(id),
                attributes: states.readings(id), commands: registry.rule(id).commands,
                hasRSSI: device.rssi != nil), all: all)
        if fresh || (all && hold), states.hasState(id) {
            states.hold(id, until: clock.now() + config.homeAssistant.stateDelay)
        }
    }

    /// Every config again (bridge first), then, with `holdingStates`, every state after
    /// `state_delay` (for Home Assistant starting: it takes a state only after the config). The
    /// devices' configs go out in paced steps (``HomeAssistantPublisher/startSweep(_:hold:)``),
    /// the first one now; a device's state is held from its own step on.
    private func republishDiscovery(holdingStates: Bool = true) {
        homeAssistant.republished()
        guard homeAssistant.enabled else { return }
        homeAssistant.publishBridge()
        for name in presence?.discovered.sorted() ?? [] { homeAssistant.publishPresence(name) }
        homeAssistant.startSweep(registry.order.map { registry[$0].address }, hold: holdingStates)
        continueDiscoverySweep()
    }

    /// One step of the sweep: up to ``HomeAssistantPublisher/sweepStep`` devices while the MQTT
    /// client has room (a device removed meanwhile is skipped), the next step later.
    private func continueDiscoverySweep() {
        var published = 0
        while published < HomeAssistantPublisher.sweepStep, let next = homeAssistant.nextSweepDevice() {
            guard let id = registry.id(next.address) else { continue }
            publishDiscovery(id, all: true, hold: next.hold)
            published += 1
        }
        homeAssistant.sweepStepDone(now: clock.now())
    }

    // MARK: Links

    /// A link dropped (or was closed by the gateway), or came up. A link that is up may not be
    /// the gateway's (one left up by another client before the start, say): a device whose rule
    /// wants a connection is connected through it now — the port's connect finds the link up —
    /// instead of waiting for an advertisement that a connected peripheral usually no longer
    /// sends.
    private func link(_ change: BLEConnectionEvent) {
        switch change {
        case .connected(let discovery):
            fleet?.linked(
                discovery.address, true, rule: registry.id(discovery.address).map { registry.rule($0) },
                now: clock.now())
            connectAtOnce(discovery, because: "link already up: adopting it")
        case .disconnected(let address, let reason):
            fleet?.linked(address, false, rule: registry.id(address).map { registry.rule($0) }, now: clock.now())
            guard let id = registry.id(address), let wasEnding = connections.dropped(address) else { return }
            let device = registry[id]
            log(.info, "\(device.name): disconnected\(reason.map { ": \($0)" } ?? "")")
            linkEnded(
                id, reason: wasEnding ? nil : (reason ?? BLEPortError(.peripheralDisconnected, "link lost")),
                now: clock.now())
            bridge.event("device_disconnected", device)
            bridge.devicesChanged()
        case .adapterReady:
            let retrying = connections.adapterReady()
            if retrying > 0 { log(.info, "adapter ready: reconnecting \(retrying) device(s) now") }
        case .adapter(let status):
            bridge.adapterChanged(status)
        }
    }

    /// A device whose rule wants a connection connects now (registered if new), unless its
    /// link is being made, up, waiting for a retry or given up (those are left alone, as are
    /// devices whose rule does not connect).
    private func connectAtOnce(_ discovery: BLEDiscovery, because reason: String) {
        guard config.role.includesCentral else { return }
        let id: DeviceID
        if let known = registry.id(discovery.address) {
            id = known
        } else {
            guard let ruleIndex = registry.ruleIndex(matching: discovery), context.rule(ruleIndex).connect,
                let registered = register(discovery)
            else { return }
            id = registered
        }
        let device = registry[id]
        guard connections.awaitsConnection(device.address, rule: registry.rule(id)), fleet.owns(device.address)
        else { return }
        log(.info, "\(device.name): \(reason)")
        connections.request(device.address, ruleIndex: device.ruleIndex, urgent: false)
    }

    /// A link ended or an attempt failed: a command waiting for it fails, the device goes
    /// offline (rules that connect) and a retry is planned, or the device is parked
    /// (`device_parked` on bridge/event).
    private func linkEnded(_ id: DeviceID, reason: BLEPortError?, now: Double, attemptFailed: Bool = false) {
        let device = registry[id]
        let rule = registry.rule(id)
        let parked = connections.linkEnded(
            device.address, reason: reason, rule: rule, name: device.name, started: started, now: now,
            attemptFailed: attemptFailed)
        commands.linkFailed(device.address, reason ?? BLEPortError(.peripheralDisconnected, "disconnected"))
        if rule.connect { availability.publish(id, device, online: false) }
        if parked { bridge.event("device_parked", device, error: reason?.description) }
    }

    // MARK: Job completions

    private func completed(_ completion: JobCompletion) {
        switch completion {
        case .connect(let address, let result): established(address, result)
        case .gatt(let address, let outcome):
            commands.finished(address, outcome) { address, ref, value, force in
                guard let id = registry.id(address) else { return }
                characteristicValue(id, poll: ref.poll, spec: ref.index, value: value, force: force)
            }
        case .servedValue(let id, let sent): peripheralBridge?.valueSent(id, sent: sent)
        case .advertised(let attempt, let error): peripheralBridge?.advertised(attempt, error: error)
        case .pairing(let address, let unpair, let error): pairing.completed(address, unpair: unpair, error)
        case .done: break
        case .attachment(let outcome): attachment?.completed(outcome.value)
        case .radioScan(let registration): radioScanStarted(registration)
        }
    }

    /// A connect job ended.
    private func established(_ address: BluetoothAddress, _ result: Result<EstablishedLink, BLEPortError>) {
        guard let id = registry.id(address) else {
            // Removed while connecting: end the link the port just made.
            return connections.establishedForRemoved(address, result)
        }
        let device = registry[id]
        let rule = registry.rule(id)
        let now = clock.now()
        switch connections.established(address, result, name: device.name, now: now) {
        case .failed(let error):
            // The failure first, then what it led to (`device_parked` after the last attempt).
            bridge.event("device_connect_failed", device, error: error.description)
            linkEnded(id, reason: error, now: now, attemptFailed: true)
        case .ignored:
            break
        case .connected(let readOnce, _):
            if !readOnce.isEmpty {
                commands.enqueue(DeviceJob(kind: .read(readOnce), receivedAt: now), for: id)
            }
            if rule.connect { availability.publish(id, device, online: true) }
            bridge.event("device_connected", device)
            bridge.devicesChanged()
            commands.linkUp(address)
            if !commands.isBusy(address) { connections.scheduleIdleDisconnect(address, rule: rule, now: now) }
        }
    }

    // MARK: Inbound messages

    /// A message on a subscribed topic, to the feature whose topic it is: the fleet's messages,
    /// Home Assistant's status, a bridge request to the owner of its verb, else a device command.
    private func route(_ message: MQTTInboundMessage) {
        if let fleet, fleet.isFleetTopic(message.topic) {
            return fleetChanged(fleet.received(message, now: clock.now()))
        }
        if homeAssistant.isStatusTopic(message.topic) { return homeAssistant.status(message) }
        if let verb = BridgeRequest.verb(of: message.topic, context: context) {
            guard let request = BridgeRequest(message, verb: verb, context: context) else { return }
            switch verb {
            case "gatt/read", "gatt/write": commands.gattRequest(request) { device(named: $0) }
            case "device/remove": removeRequest(request)
            case "device/bindkey": states.bindKeyRequest(request, registry: registry)
            case "device/pair": pairing.pairRequest(request, unpair: false)
            case "device/unpair": pairing.pairRequest(request, unpair: true)
            case "device/pair/confirm": pairing.confirmRequest(request)
            case "presence/identity":
                guard let presence else {
                    return request.respond(.error, "presence is not configured (config.json has no presence section)")
                }
                presence.identityRequest(request, log: context.log, now: context.clock.now())
            default:
                request.respond(
                    .error,
                    "unknown request \"\(verb)\" (expected gatt/read, gatt/write, device/remove, device/bindkey, device/pair, device/pair/confirm, device/unpair or presence/identity)"
                )
            }
            return
        }
        command(message)
    }

    /// A message on a device's command topic: the command runner's; in a fleet, the fleet hears
    /// whose device it named and whether this gateway took it (held or dropped when not).
    private func command(_ message: MQTTInboundMessage) {
        guard let named = commands.handle(message, resolve: { device(named: $0) }), let fleet else { return }
        fleet.command(message, for: named.address, owned: named.owned, now: clock.now())
    }

    /// `bridge/request/device/remove` `{"device": name or address, "transaction"?}`: a known
    /// device without a command in progress is removed (``removeDevice(_:)``).
    private func removeRequest(_ request: BridgeRequest) {
        guard case .string(let name)? = request.object["device"], let id = registry.id(nameOrAddress: name) else {
            return request.respond(.error, "device: expected the name or address of a known device")
        }
        let device = registry[id]
        if commands.isBusy(device.address) {
            return request.respond(
                .error, "\(device.name) has a command in progress; try again when it has answered")
        }
        log(.notice, "\(device.name) (\(device.address)): removed on request")
        removeDevice(id)
        request.respond(.ok)
    }

    // MARK: Fleet

    /// This gateway gained or lost devices in the fleet (docs/fleet.md): a gained one runs the
    /// commands held for it and gets its availability, discovery and (when its rule connects)
    /// its link; a lost one goes quiet here — nothing is retracted, the new owner publishes —
    /// and its link ends.
    private func fleetChanged(_ changes: [FleetView.Change]) {
        for change in changes {
            let (raw, gained) =
                switch change {
                case .gained(let raw): (raw, true)
                case .lost(let raw): (raw, false)
                }
            if FleetView.isIdentity(raw) {
                presenceOwnerChanged(raw, gained: gained)
                continue
            }
            let address = BluetoothAddress(rawValue: raw)
            guard let id = registry.id(address) else { continue }
            let device = registry[id]
            let rule = registry.rule(id)
            log(
                .info,
                "fleet: \(device.name) (\(address)) \(gained ? "is this gateway's now" : "went to another gateway")")
            bridge.event(gained ? "device_owned" : "device_handed_over", device)
            guard gained else {
                availability.forget(id)
                if rule.connect, connections.phase(address) != .idle { connections.disconnect(address) }
                continue
            }
            // Commands that arrived while the previous owner was letting go, and it did not run.
            for message in fleet?.takeHeld(address, now: clock.now()) ?? [] { command(message) }
            if homeAssistant.enabled { publishDiscovery(id, all: true, hold: false) }
            if !rule.connect {
                availability.forget(id)
                availability.advertised(id, device, rule: rule, now: clock.now())
            } else if connections.awaitsConnection(address, rule: rule) {
                connections.request(address, ruleIndex: device.ruleIndex, urgent: false)
            }
        }
    }

    // MARK: MQTT connection

    private func mqttConnection(_ connected: Bool) {
        context.output.connectionChanged(connected)
        if connected { republishRetained() } else { homeAssistant.cancelSweep() }
    }

    /// After an MQTT reconnect: everything retained again (the broker may have lost it, and the
    /// last will may have set `bridge/state` offline). States are not held for Home Assistant
    /// here: an HA that lost its entities says so with `online` on its status topic (it does on
    /// every connection to the broker), and that holds them; a hold now would only delay every
    /// reading after each reconnect by `state_delay`.
    private func republishRetained() {
        bridge.publishOnline()
        republishDiscovery(holdingStates: false)
        for id in registry.order { availability.republish(id, registry[id]) }
    }

    // MARK: Timer

    private func timerFired() {
        context.timer.fired()
        runDue()
        let now = clock.now()
        context.timer.arm(max(now + 0.01, min(nextDeadline() ?? now + 3600, now + 3600)))
    }

    /// Runs everything that is due at the clock's current time: deferred and heartbeat
    /// publishes, states held for Home Assistant, discovery republishing, advertisement
    /// availability timeouts, reconnect retries, polls, command connection waits that expired,
    /// idle disconnects of on-demand connections, forgetting silent devices and `bridge/health`.
    private func runDue() {
        let now = clock.now()
        if homeAssistant.republishDue(now: now) { republishDiscovery() }
        if homeAssistant.sweepDue(now: now) { continueDiscoverySweep() }
        bridge.tick(now: now)
        for id in registry.order {
            let device = registry[id]
            let rule = registry.rule(id)
            states.tick(id, device, rule: rule, now: now)
            if availability.tick(id, device, rule: rule, now: now) { bridge.event("device_unavailable", device) }
        }
        connections.tick(now: now, busy: { [commands] in commands.isBusy($0) }) { address, spec in
            guard let id = registry.id(address) else { return }
            commands.enqueue(DeviceJob(kind: .poll(spec), receivedAt: now), for: id)
        }
        commands.tick(now: now)
        pairing.tick(now: now)
        if let fleet { fleetChanged(fleet.tick(now: now)) }
        presenceTick(now: now)
        for id in registry.silent(now: now, busy: { isBusy($0) }) { removeDevice(id) }
        if health.due(now: now) { health.publish(now: now) }
    }

    /// The earliest time something is due.
    private func nextDeadline() -> Double? {
        var next = min(
            homeAssistant.nextDeadline ?? .infinity, health.nextDeadline ?? .infinity, bridge.nextDeadline ?? .infinity,
            connections.nextDeadline ?? .infinity, commands.nextDeadline ?? .infinity, fleet?.nextDeadline ?? .infinity,
            pairing.nextDeadline ?? .infinity, presence?.nextDeadline ?? .infinity)
        for id in registry.order {
            let rule = registry.rule(id)
            if let due = states.nextDeadline(id, rule: rule) { next = min(next, due) }
            if let forget = registry.forgetDeadline(id, busy: { isBusy($0) }) { next = min(next, forget) }
            if let offline = availability.nextDeadline(id, rule: rule) { next = min(next, offline) }
        }
        return next.isFinite ? next : nil
    }

    // MARK: Reading the core (health, tests)

    /// What the gateway did so far.
    public var counters: GatewayCounters { context.reportedCounters }

    /// The store-and-forward stage's counters (nil when it is disabled or not started).
    public var outboxStatistics: StoreAndForward.Statistics? { context.output.outbox?.statistics }

    /// The value a served characteristic has now (what a central reads).
    public func servedValue(_ id: PeripheralCharacteristicID) -> [UInt8]? { peripheralBridge?.value(id) }

    /// The `bridge/health` payload as it would be published now (without a process sample).
    public var healthPayload: JSONValue { health.payload(now: clock.now(), sample: nil) }

    /// The `bridge/health` payload now, with the process's figures (the web server's
    /// `/api/health` and `/metrics`).
    public var currentHealth: JSONValue { health.snapshot(now: clock.now()) }

    /// Marks each device's state and availability messages as the core publishes them (also
    /// while the broker is away) for ``takeDeviceEvents()``: the web page's event stream.
    /// `first` is called on the loop when an interval's first event is marked (after the start
    /// or a take); nil ends it and forgets what was marked. One watcher; nothing is marked
    /// without one.
    public func observeDeviceEvents(_ first: (@Sendable () -> Void)?) {
        context.deviceEvents = first.map { DeviceEvents(first: $0) }
    }

    /// What was marked since the last take (``observeDeviceEvents(_:)``): each device topic's
    /// latest message, in the order the topics first came; empty when nothing is watched.
    public func takeDeviceEvents() -> [DeviceEvent] {
        guard let events = context.deviceEvents, !events.isEmpty else { return [] }
        return events.take { registry.name(slot: $0) }
    }

    /// What the registry knows of each device, in `bridge/devices` order.
    public var deviceSnapshots: [DeviceSnapshot] {
        registry.order.map { id in
            let device = registry[id]
            return DeviceSnapshot(
                name: device.name, address: device.address.description, localName: device.localName,
                rssi: device.rssi, lastSeenMilliseconds: device.lastSeenWall,
                connected: connections.isConnected(device.address), format: states.format(id),
                stateTopic: device.stateTopic)
        }
    }

    /// The devices as `bridge/devices` lists them, each with `last_seen` and `state` (its last
    /// readings, as its state message has them).
    public var devicesPayload: JSONValue {
        .array(
            registry.order.map { id in
                let device = registry[id]
                var entry = BridgePublisher.deviceEntry(
                    device, connected: connections.isConnected(device.address), format: states.format(id),
                    services: registry.services(id))
                if case .object(var members) = entry {
                    members.append(
                        ("last_seen", device.lastSeenWall.map { .string(HealthReporter.isoText($0)) } ?? .null))
                    // The last readings, as the state message has them (the core wrote it: JSON).
                    members.append(("state", (try? JSONValue.parse(states.statePayload(id, device))) ?? .null))
                    entry = .object(members)
                }
                return entry
            })
    }
}

/// One device as the registry knows it (``Gateway/deviceSnapshots``).
public struct DeviceSnapshot: Sendable {
    /// The topic level: friendly name, else the address without colons.
    public var name: String
    public var address: String
    public var localName: String?
    public var rssi: Int?
    /// Wall-clock milliseconds of the last advertisement or value.
    public var lastSeenMilliseconds: Int64?
    public var connected: Bool
    public var format: String?
    /// `<base>/<name>`, where its readings go.
    public var stateTopic: String

    public init(
        name: String, address: String, localName: String?, rssi: Int?, lastSeenMilliseconds: Int64?, connected: Bool,
        format: String?, stateTopic: String
    ) {
        self.name = name
        self.address = address
        self.localName = localName
        self.rssi = rssi
        self.lastSeenMilliseconds = lastSeenMilliseconds
        self.connected = connected
        self.format = format
        self.stateTopic = stateTopic
    }
}
