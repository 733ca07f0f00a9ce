import JSON

extension Gateway {
    /// `<base>/bridge/health`, every `health.interval` on the clock (not retained, not queued
    /// while offline): uptime, RSS, CPU, traffic counters, drops by reason, the
    /// store-and-forward queue, links, reconnects and the BLE port's round-trip latency.
    public var healthPayload: JSONValue { healthPayload(now: clock.now(), sample: nil) }

    func publishHealth(now: Double) {
        let sample = processSample()
        publish(base + "/bridge/health", json: healthPayload(now: now, sample: sample), retain: false, kind: .snapshot)
        if let sample { lastProcessSample = (now, sample) }
    }

    func healthPayload(now: Double, sample: ProcessSample?) -> JSONValue {
        func number(_ value: Int) -> JSONValue { .number(Double(value)) }
        let queue = outbox?.statistics ?? StoreAndForward.Statistics()
        var process: [(key: String, value: JSONValue)] = []
        if let sample {
            process.append(("rss_bytes", number(sample.residentBytes)))
            process.append(("cpu_seconds", .number((sample.cpuSeconds * 1000).rounded() / 1000)))
            if let last = lastProcessSample, now > last.time {
                let percent = (sample.cpuSeconds - last.sample.cpuSeconds) / (now - last.time) * 100
                process.append(("cpu_percent", .number((max(0, percent) * 10).rounded() / 10)))
            } else {
                process.append(("cpu_percent", .null))
            }
        }
        let latency = ble.lastRoundTripLatency()
        var peripheral: [(key: String, value: JSONValue)] = []
        if config.role.includesPeripheral {
            peripheral = [("peripheral", .object([
                ("updates", number(served.updates)), ("writes", number(served.writes)),
                ("subscriptions", number(served.subscribers.values.reduce(0) { $0 + $1.count })),
                ("advertising", .bool(served.advertisement != nil)), ("advertising_errors", number(served.advertisingErrors)),
            ]))]
        }
        return .object([
            ("uptime_s", .number((now - startedAt).rounded())),
            ("timestamp", .string(Self.isoText(clock.wallMilliseconds()))),
            ("process", .object(process)),
            ("advertisements", number(counters.advertisements)),
            ("notifications", number(counters.notifications)),
            ("decoded", number(counters.decoded)),
            ("parse_errors", number(counters.parseErrors)),
            ("published", number(counters.published)),
            ("dropped", .object([
                ("filtered", number(counters.dropped.filtered)),
                ("rate_control", number(counters.dropped.rateControl)),
                ("rate_limited", number(counters.dropped.rateLimited)),
                ("registry_full", number(counters.dropped.registryFull)),
                ("retained_command", number(counters.dropped.retainedCommand)),
                ("response_topic", number(counters.dropped.responseTopic)),
                ("mqtt_queue_full", number(mqtt.queueFullDrops)),
                ("mqtt_inbound_full", number(mqtt.inboundDrops)),
                ("parse_error", number(counters.parseErrors)),
                ("queue_full", number(queue.droppedFull)),
                ("queue_expired", number(queue.droppedExpired)),
                ("queue_unreadable", number(queue.droppedUnreadable)),
                ("offline_qos0", number(queue.droppedQoS0)),
                ("broker_rejected", number(queue.rejected)),
                ("peripheral_value", number(served.valueErrors)),
            ])),
            ("queue", .object([
                ("depth", number(queue.depth)), ("bytes", number(queue.bytes)), ("queued", number(queue.queued)),
                ("spilled", number(queue.spilled)), ("replayed", number(queue.replayed)), ("write_errors", number(queue.writeErrors)),
            ])),
            ("store_and_forward", .object([
                ("durable", .bool(queue.durable)), ("memory_only", number(queue.memoryOnly)),
                ("free_bytes", queue.freeBytes.map(number) ?? .null),
            ])),
            ("devices", number(devices.count)),
            ("connections", number(devices.count { $0.link == .connected })),
            ("connects", number(counters.connects)),
            ("reconnects", number(counters.reconnects)),
            ("connect_failures", number(counters.connectFailures)),
            ("disconnects", number(counters.disconnects)),
            ("commands", number(counters.commands)),
            ("command_errors", number(counters.commandErrors)),
            ("ble_latency_ms", latency.map { .number(($0 * 10_000).rounded() / 10) } ?? .null),
        ] + peripheral)
    }

    static func isoText(_ milliseconds: Int64) -> String {
        var bytes: [UInt8] = []
        Timestamp.write(milliseconds: milliseconds, into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }
}
