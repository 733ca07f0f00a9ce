import JSON

/// `<base>/bridge/health`, every `health.interval` on the clock (not retained, not queued while
/// offline): uptime, RSS, CPU, traffic counters, drops by reason, the store-and-forward queue,
/// links, reconnects, the BLE port's round-trip latency and the peripheral role. Loop-confined.
final class HealthReporter {
    private let context: CoreContext
    private let processSample: @Sendable () -> ProcessSample?
    /// Sections of components the core does not run (the Bluetooth proxy's API server).
    private let extra: (@Sendable () -> [(key: String, value: JSONValue)])?
    // What the report reads from the ports and the other features (never their state).
    private let registry: DeviceRegistry
    private let connections: ConnectionManager
    private let bridge: BridgePublisher
    private let peripheral: PeripheralBridge?
    private let fleet: Fleet?
    /// The radio's view and the raw radio (nil: off).
    private let radio: RawRadio?
    private(set) var startedAt: Double = 0
    private var nextAt: Double?
    private let presence: Presence?
    private var lastSample: (time: Double, sample: ProcessSample)?

    init(
        context: CoreContext, processSample: @escaping @Sendable () -> ProcessSample?,
        extra: (@Sendable () -> [(key: String, value: JSONValue)])?, registry: DeviceRegistry,
        connections: ConnectionManager, bridge: BridgePublisher, peripheral: PeripheralBridge?, fleet: Fleet?,
        radio: RawRadio? = nil, presence: Presence? = nil
    ) {
        self.radio = radio
        self.presence = presence
        self.bridge = bridge
        self.context = context
        self.processSample = processSample
        self.extra = extra
        self.registry = registry
        self.connections = connections
        self.peripheral = peripheral
        self.fleet = fleet
    }

    /// The gateway started at `now`: the first report is due one interval later.
    func start(now: Double) {
        startedAt = now
        if context.config.health.enabled {
            nextAt = now + context.config.health.interval
            context.due(at: now + context.config.health.interval)
        }
    }

    /// Whether a report is due at `now` (the next one is then planned).
    func due(now: Double) -> Bool {
        guard let due = nextAt, now >= due else { return false }
        nextAt = max(due + context.config.health.interval, now)
        return true
    }

    var nextDeadline: Double? { nextAt }

    /// Publishes a report with a fresh process sample.
    func publish(now: Double) {
        let sample = processSample()
        context.output.publish(
            context.bridge + "/health", json: payload(now: now, sample: sample), retain: false, kind: .snapshot)
        if let sample { lastSample = (now, sample) }
    }

    /// The report at `now` with a fresh process sample, leaving the published reports' CPU
    /// percentage to them (its interval stays the one between two reports).
    func snapshot(now: Double) -> JSONValue {
        payload(now: now, sample: processSample())
    }

    /// The peripheral role's figures (nil: not a peripheral; zeros when it has no port).
    private var served: PeripheralBridge.Statistics? {
        guard context.config.role.includesPeripheral else { return nil }
        return peripheral?.statistics
            ?? PeripheralBridge.Statistics(
                updates: 0, writes: 0, subscriptions: 0, advertising: false, advertisingErrors: 0, valueErrors: 0)
    }

    /// The report at `now` (with the process figures of `sample`).
    func payload(now: Double, sample: ProcessSample?) -> JSONValue {
        func number(_ value: Int) -> JSONValue { .number(Double(value)) }
        let counters = context.reportedCounters
        let queue = context.output.outbox?.statistics ?? StoreAndForward.Statistics()
        let served = self.served
        let mqtt = context.output.mqtt
        var process: [(key: String, value: JSONValue)] = []
        if let sample {
            process.append(("rss_bytes", number(sample.residentBytes)))
            process.append(("cpu_seconds", .number((sample.cpuSeconds * 1000).rounded() / 1000)))
            if let last = lastSample, now > last.time {
                let percent = (sample.cpuSeconds - last.sample.cpuSeconds) / (now - last.time) * 100
                process.append(("cpu_percent", .number((max(0, percent) * 10).rounded() / 10)))
            } else {
                process.append(("cpu_percent", .null))
            }
        }
        var adapter: [(key: String, value: JSONValue)] = []
        if let status = bridge.adapter { adapter = [("adapter", .object(bridge.adapterMembers(status)))] }
        var peripheral: [(key: String, value: JSONValue)] = []
        if let served {
            peripheral = [
                (
                    "peripheral",
                    .object([
                        ("updates", number(served.updates)), ("writes", number(served.writes)),
                        ("subscriptions", number(served.subscriptions)),
                        ("advertising", .bool(served.advertising)),
                        ("advertising_errors", number(served.advertisingErrors)),
                    ])
                )
            ]
        }
        return .object(
            [
                ("uptime_s", .number((now - startedAt).rounded())),
                ("timestamp", .string(Self.isoText(context.clock.wallMilliseconds()))),
                ("process", .object(process)),
                ("advertisements", number(counters.advertisements)),
                ("notifications", number(counters.notifications)),
                ("decoded", number(counters.decoded)),
                ("parse_errors", number(counters.parseErrors)),
                ("published", number(counters.published)),
                (
                    "dropped",
                    .object([
                        ("filtered", number(counters.dropped.filtered)),
                        ("repeated_frame", number(counters.dropped.repeatedFrame)),
                        ("rate_control", number(counters.dropped.rateControl)),
                        ("rate_limited", number(counters.dropped.rateLimited)),
                        ("registry_full", number(counters.dropped.registryFull)),
                        ("retained_command", number(counters.dropped.retainedCommand)),
                        ("response_topic", number(counters.dropped.responseTopic)),
                        ("key_missing", number(counters.dropped.keyMissing)),
                        ("key_wrong", number(counters.dropped.keyWrong)),
                        ("other_owner", number(counters.dropped.otherOwner)),
                        ("pairing_refused", number(counters.dropped.pairingRefused)),
                        ("radio_rate_limited", number(counters.dropped.radioRateLimited)),
                        ("mqtt_queue_full", number(mqtt.queueFullDrops)),
                        ("mqtt_inbound_full", number(mqtt.inboundDrops)),
                        ("parse_error", number(counters.parseErrors)),
                        ("queue_full", number(queue.droppedFull)),
                        ("queue_expired", number(queue.droppedExpired)),
                        ("queue_unreadable", number(queue.droppedUnreadable)),
                        ("offline_qos0", number(queue.droppedQoS0)),
                        ("broker_rejected", number(queue.rejected)),
                        ("peripheral_value", number(served?.valueErrors ?? 0)),
                        ("notification_cut", number(counters.dropped.notificationCut)),
                    ])
                ),
                (
                    "queue",
                    .object([
                        ("depth", number(queue.depth)), ("bytes", number(queue.bytes)),
                        ("queued", number(queue.queued)),
                        ("spilled", number(queue.spilled)), ("replayed", number(queue.replayed)),
                        ("write_errors", number(queue.writeErrors)),
                    ])
                ),
                (
                    "store_and_forward",
                    .object([
                        ("durable", .bool(queue.durable)), ("memory_only", number(queue.memoryOnly)),
                        ("free_bytes", queue.freeBytes.map(number) ?? .null),
                    ])
                ),
                ("devices", number(registry.count)),
                ("connections", number(connections.connectedCount)),
                ("parked", number(connections.parkedCount)),
                ("connects", number(counters.connects)),
                ("reconnects", number(counters.reconnects)),
                ("connect_failures", number(counters.connectFailures)),
                ("disconnects", number(counters.disconnects)),
                ("commands", number(counters.commands)),
                ("command_errors", number(counters.commandErrors)),
                (
                    "ble_latency_ms",
                    context.ble.lastRoundTripLatency().map { .number(($0 * 10_000).rounded() / 10) } ?? .null
                ),
            ] + adapter + peripheral + (fleet.map { [("fleet", $0.health)] } ?? [])
                + (radio.map { [("raw_radio", $0.healthSection())] } ?? [])
                + (presence.map { [("presence", $0.healthSection())] } ?? []) + (extra?() ?? []))
    }

    static func isoText(_ milliseconds: Int64) -> String {
        var bytes: [UInt8] = []
        Timestamp.write(milliseconds: milliseconds, into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }
}
