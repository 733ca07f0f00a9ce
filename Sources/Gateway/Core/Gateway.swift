import Bluetooth
import JSON
import Parsers
import Retry

/// The gateway (design.md §§5–6): scans, matches device rules, connects, subscribes and polls,
/// decodes, publishes state with rate control, runs commands through one queue per device, and
/// keeps availability and the bridge topics — all through ports (``BLEPort``, ``MQTTPort``,
/// ``GatewayClock``), so every behaviour is testable with in-memory ports and a manual clock.
///
/// Life cycle: ``start()`` publishes the bridge topics, subscribes to the command topics and
/// starts scanning and the timer; ``stop()`` ends everything and publishes `bridge/state`
/// offline (waiting for delivery) — call it before disconnecting MQTT. The entry points
/// ``handle(_:)-(BLEDiscovery)``, ``handle(_:)-(MQTTInboundMessage)``,
/// ``handle(_:)-(BLEConnectionEvent)`` and ``tick()`` are what the started loops call; tests and
/// other drivers may call them directly.
public actor Gateway {
    let config: GatewayConfig
    let ble: any BLEPort
    /// The peripheral role's port (nil: central only, whatever `role` says).
    let peripheral: (any PeripheralPort)?
    let mqtt: any MQTTPort
    let clock: any GatewayClock
    let makeReconnect: @Sendable () -> any ReconnectStrategy
    let log: GatewayLogger
    let version: String
    let base: String

    var devices: [DeviceRecord] = []
    var indexByAddress: [BluetoothAddress: Int] = [:]
    var scheduler: ConnectionScheduler
    var queues: [BluetoothAddress: [DeviceJob]] = [:]
    var draining: Set<BluetoothAddress> = []
    var connectWaiters: [BluetoothAddress: [ConnectionWaiter]] = [:]
    var nextWaiterID: UInt64 = 0
    var activeJobs = 0
    var connectTasks = 0
    var idleWaiters: [CheckedContinuation<Void, Never>] = []

    var tasks: [Task<Void, Never>] = []
    var timerTask: Task<Void, Never>?
    var sleepingUntil: Double?
    var started = false
    var scratch: [UInt8] = []

    let stateDirectory: String?
    let processSample: @Sendable () -> ProcessSample?
    /// The store-and-forward stage, opened by ``start()`` (nil when disabled).
    public private(set) var outbox: StoreAndForward?
    var discoveryRepublishAt: Double?
    var nextHealthAt: Double?
    /// When `bridge/devices` last went out, and whether a change waits for the next slot (the
    /// list is published at most once a second: with rotating addresses it changes constantly).
    var devicesPublishedAt: Double?
    var devicesPending = false
    /// The bytes per entry of the last `bridge/devices`, to size the next one's buffer.
    var devicesEntryBytes = Gateway.devicesEntryEstimate
    var startedAt: Double = 0
    var lastProcessSample: (time: Double, sample: ProcessSample)?
    /// The peripheral role's state (values served, what is advertised).
    var served = PeripheralState()
    /// The attribute names, units, device classes and formats all devices share.
    var attributeTable = AttributeTable()
    /// The service UUID lists devices advertised, each kept once.
    var serviceLists = ServiceLists()

    /// Warnings about undecodable payloads: 20 at once, then one per 3 s, so garbage from many
    /// devices (rotating addresses) cannot flood the journal; what is held back is counted in
    /// the next line and in `parse_errors`.
    var parseWarnings = TokenBucket(capacity: 20, interval: 3, now: 0)
    var parseWarningsHeld = 0

    /// What the gateway did so far.
    public internal(set) var counters = GatewayCounters()

    /// - Parameters:
    ///   - reconnect: makes the per-device reconnect rule (the central's policy, adapted).
    ///   - logger: where log lines go; ``GatewayConfig/secrets`` are redacted before they reach it.
    ///   - version: reported on `bridge/info`.
    ///   - stateDirectory: where the store-and-forward queue file (`outbox.log`) lives, e.g.
    ///     from `--state-dir`; overrides `state_directory` of config.json; with neither the
    ///     queue is kept in memory only.
    ///   - processSample: RSS and CPU time for `bridge/health` (default: `/proc/self`).
    ///   - peripheral: the peripheral role (used when `role` is peripheral or both).
    public init(config: GatewayConfig, ble: any BLEPort, peripheral: (any PeripheralPort)? = nil, mqtt: any MQTTPort,
                clock: any GatewayClock,
                reconnect: @escaping @Sendable () -> any ReconnectStrategy = { ReconnectPolicy<SystemRandomNumberGenerator>() },
                logger: GatewayLogger = .none,
                version: String = "dev", stateDirectory: String? = nil,
                processSample: @escaping @Sendable () -> ProcessSample? = { ProcessSample.current() }) {
        self.config = config
        self.ble = ble
        self.peripheral = peripheral
        self.mqtt = mqtt
        self.clock = clock
        self.makeReconnect = reconnect
        self.log = logger.redacting(config.secrets)
        self.version = version
        self.stateDirectory = stateDirectory ?? config.stateDirectory
        self.processSample = processSample
        self.base = config.mqtt.baseTopic
        self.scheduler = ConnectionScheduler(limit: config.bluetooth.maxConnections)
    }

    /// The last will to configure on the MQTT client before it connects: `<base>/bridge/state`
    /// `{"state":"offline"}`, retained.
    public static func lastWill(for config: GatewayConfig) -> MQTTOutboundMessage {
        MQTTOutboundMessage(topic: config.mqtt.baseTopic + "/bridge/state", payload: Array(#"{"state":"offline"}"#.utf8),
                            qos: config.mqtt.qos, retain: true)
    }

    /// The topic filters the gateway subscribes to (with Home Assistant discovery on, also
    /// `homeassistant/status`).
    public static func subscriptions(for config: GatewayConfig) -> [String] {
        let base = config.mqtt.baseTopic
        var filters = [base + "/+/set", base + "/+/set/+", base + "/+/get", base + "/bridge/request/#"]
        if config.homeAssistant.enabled { filters.append(config.homeAssistant.statusTopic) }
        return filters
    }

    /// The file name of the store-and-forward queue in the state directory.
    public static let queueFileName = "outbox.log"

    /// Opens the store-and-forward queue (replaying what a previous run left), publishes the
    /// bridge topics and discovery, subscribes to commands, starts scanning and the timers.
    /// Throws ``StoreAndForwardError`` when the queue file cannot be opened.
    public func start() async throws {
        guard !started else { return }
        if config.storeAndForward.enabled, outbox == nil {
            let queue = try DiskQueue(path: stateDirectory.map { $0 + "/" + Self.queueFileName },
                                      limits: DiskQueue.Limits(config.storeAndForward))
            if queue.discardedBytes > 0 {
                log(.warning, "store-and-forward: discarded \(queue.discardedBytes) bytes of a damaged tail of \(queue.path ?? "")")
            }
            if !queue.isEmpty { log(.notice, "store-and-forward: \(queue.count) messages from the previous run to replay") }
            outbox = StoreAndForward(queue: queue, mqtt: mqtt, clock: clock, settings: config.storeAndForward, logger: log)
        }
        started = true
        startedAt = clock.now()
        log(.debug, "configuration: \(config.mqtt), \(config.devices.count) device rules")
        outbox?.connectionChanged(true)
        publishBridgeOnline()
        publishBridgeDiscovery()
        for filter in Self.subscriptions(for: config) {
            let stream = try await mqtt.subscribe(filter)
            tasks.append(Task { [weak self] in
                for await message in stream { await self?.handle(message) }
            })
        }
        let connectionStates = mqtt.connectionEvents()
        tasks.append(Task { [weak self] in
            for await connected in connectionStates { await self?.handle(mqttConnected: connected) }
        })
        let events = ble.connectionEvents()
        tasks.append(Task { [weak self] in
            for await event in events { await self?.handle(event) }
        })
        if config.role.includesCentral {
            let discoveries = try await ble.scan(services: config.bluetooth.scanServices)
            tasks.append(Task { [weak self] in
                for await discovery in discoveries { await self?.handle(discovery) }
            })
        }
        if config.role.includesPeripheral, let peripheral { try await startPeripheral(peripheral) }
        if config.health.enabled { nextHealthAt = clock.now() + config.health.interval }
        armTimer(min(clock.now() + 3600, nextHealthAt ?? .infinity))
        log(.notice, "gateway started (role \(config.role.rawValue)): \(config.devices.count) device rules, base topic \(base)")
    }

    /// Stops scanning and timers, disconnects devices and publishes `bridge/state` offline.
    public func stop() async {
        guard started else { return }
        started = false
        for task in tasks { task.cancel() }
        tasks = []
        timerTask?.cancel()
        timerTask = nil
        var links: [BluetoothAddress] = []
        for index in devices.indices {
            for task in devices[index].notificationTasks { task.cancel() }
            devices[index].notificationTasks = []
            if devices[index].link == .connected || devices[index].link == .connecting {
                devices[index].link = .disconnecting
                links.append(devices[index].address)
            }
        }
        // All at once: BlueZ answers Disconnect only after its disconnect timer (2 s), so one
        // after another would take 2 s per connected device.
        let ble = self.ble
        await withTaskGroup(of: Void.self) { group in
            for address in links { group.addTask { await ble.disconnect(address) } }
        }
        try? await mqtt.publishAndWait(Self.lastWill(for: config))
        log(.notice, "gateway stopped")
    }

    /// Runs until the task is cancelled, then stops.
    public func run() async throws {
        try await start()
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(3600))
        }
        await stop()
    }

    /// Waits until no command, poll or connection attempt is in progress (tests, shutdown).
    public func waitUntilIdle() async {
        while activeJobs > 0 || connectTasks > 0 || !draining.isEmpty {
            await withCheckedContinuation { idleWaiters.append($0) }
        }
    }

    func signalIdleIfNeeded() {
        guard activeJobs == 0, connectTasks == 0, draining.isEmpty else { return }
        let waiters = idleWaiters
        idleWaiters = []
        for waiter in waiters { waiter.resume() }
    }

    /// The MQTT connection changed (what ``MQTTPort/connectionEvents()`` reports): the
    /// store-and-forward stage switches mode; after a reconnect the retained topics and
    /// discovery are published again (behind any replay).
    public func handle(mqttConnected connected: Bool) {
        outbox?.connectionChanged(connected)
        if connected { republishRetained() }
    }

    // MARK: Publishing

    func publish(_ topic: String, _ payload: [UInt8], retain: Bool, qos: Int? = nil, correlationData: [UInt8]? = nil,
                 kind: OutboundKind = .stored) {
        publish(topic, owned: Self.exactCopy(payload), retain: retain, qos: qos, correlationData: correlationData, kind: kind)
    }

    /// Publishes `payload` without copying it: for a buffer made for this one message, which
    /// nothing writes into afterwards.
    func publish(_ topic: String, owned payload: [UInt8], retain: Bool, qos: Int? = nil, correlationData: [UInt8]? = nil,
                 kind: OutboundKind = .stored) {
        counters.published += 1
        let message = MQTTOutboundMessage(topic: topic, payload: payload, qos: qos ?? config.mqtt.qos, retain: retain,
                                          correlationData: correlationData)
        if let outbox { outbox.publish(message, kind: kind) } else { mqtt.publish(message) }
    }

    /// An exact-size copy of a payload that is usually `scratch`, whose buffer has the capacity of
    /// the largest message so far. Sharing it would make the next write into `scratch` copy that
    /// whole capacity and leave every waiting message holding a buffer of that size — ~4 KB per
    /// queued 90-byte state (BENCHMARKS.md).
    static func exactCopy(_ payload: [UInt8]) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: payload.count) { buffer, count in
            count = buffer.initialize(fromContentsOf: payload)
        }
    }

    func publish(_ topic: String, json: JSONValue, retain: Bool, qos: Int? = nil, kind: OutboundKind = .stored) {
        scratch.removeAll(keepingCapacity: true)
        json.write(into: &scratch)
        publish(topic, scratch, retain: retain, qos: qos, kind: kind)
    }

    func rule(_ index: Int) -> DeviceRule { config.devices[devices[index].ruleIndex] }

    /// The device's advertisement format, nil before one was decoded.
    func format(_ index: Int) -> String? { attributeTable.format(devices[index].format) }

    /// `<base>/<name>`: the device's state topic.
    func stateTopic(_ index: Int) -> String { devices[index].stateTopic }
}
