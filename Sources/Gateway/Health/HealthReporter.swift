import JSON

/// `<base>/bridge/health`, every `health.interval` on the clock (not retained, not queued while
/// offline): uptime, RSS, CPU, traffic counters, drops by reason, the store-and-forward queue,
/// links, reconnects, the BLE port's round-trip latency and the peripheral role. Loop-confined.
final class HealthReporter {
    /// What the rest of the core reports into a health message.
    struct Figures {
        var counters: GatewayCounters
        var queue: StoreAndForward.Statistics
        var mqttQueueFull: Int
        var mqttInboundFull: Int
        var devices: Int
        var connections: Int
        /// Devices parked now (never accepted a connection in `bluetooth.park_after` attempts).
        var parked: Int
        var bleLatency: Double?
        var peripheral: PeripheralBridge.Statistics?
        /// Sections of components the core does not run (the Bluetooth proxy's API server).
        var extra: [(key: String, value: JSONValue)] = []
    }

    private let context: CoreContext
    private let processSample: @Sendable () -> ProcessSample?
    private(set) var startedAt: Double = 0
    private var nextAt: Double?
    private var lastSample: (time: Double, sample: ProcessSample)?

    init(context: CoreContext, processSample: @escaping @Sendable () -> ProcessSample?) {
        self.context = context
        self.processSample = processSample
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
    func publish(now: Double, _ figures: Figures) {
        let sample = processSample()
        context.output.publish(
            context.bridge + "/health", json: payload(now: now, sample: sample, figures), retain: false,
            kind: .snapshot)
        if let sample { lastSample = (now, sample) }
    }

    func payload(now: Double, sample: ProcessSample?, _ figures: Figures) -> JSONValue {
        func number(_ value: Int) -> JSONValue { .number(Double(value)) }
        let counters = figures.counters
        let queue = figures.queue
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
        var peripheral: [(key: String, value: JSONValue)] = []
        if let served = figures.peripheral {
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
                        ("rate_control", number(counters.dropped.rateControl)),
                        ("rate_limited", number(counters.dropped.rateLimited)),
                        ("registry_full", number(counters.dropped.registryFull)),
                        ("retained_command", number(counters.dropped.retainedCommand)),
                        ("response_topic", number(counters.dropped.responseTopic)),
                        ("key_missing", number(counters.dropped.keyMissing)),
                        ("key_wrong", number(counters.dropped.keyWrong)),
                        ("other_owner", number(counters.dropped.otherOwner)),
                        ("mqtt_queue_full", number(figures.mqttQueueFull)),
                        ("mqtt_inbound_full", number(figures.mqttInboundFull)),
                        ("parse_error", number(counters.parseErrors)),
                        ("queue_full", number(queue.droppedFull)),
                        ("queue_expired", number(queue.droppedExpired)),
                        ("queue_unreadable", number(queue.droppedUnreadable)),
                        ("offline_qos0", number(queue.droppedQoS0)),
                        ("broker_rejected", number(queue.rejected)),
                        ("peripheral_value", number(figures.peripheral?.valueErrors ?? 0)),
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
                ("devices", number(figures.devices)),
                ("connections", number(figures.connections)),
                ("parked", number(figures.parked)),
                ("connects", number(counters.connects)),
                ("reconnects", number(counters.reconnects)),
                ("connect_failures", number(counters.connectFailures)),
                ("disconnects", number(counters.disconnects)),
                ("commands", number(counters.commands)),
                ("command_errors", number(counters.commandErrors)),
                ("ble_latency_ms", figures.bleLatency.map { .number(($0 * 10_000).rounded() / 10) } ?? .null),
            ] + peripheral + figures.extra)
    }

    static func isoText(_ milliseconds: Int64) -> String {
        var bytes: [UInt8] = []
        Timestamp.write(milliseconds: milliseconds, into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }
}
