import Gateway
import HTTPServer
import JSON

/// `/metrics`: `bridge/health` and the per-device, MQTT and web figures in Prometheus's text
/// format (docs/web.md, "Metrics"). Names follow Prometheus's conventions: the `gattway_`
/// prefix, base units in the name (`_seconds`, `_bytes`, `_dbm`), `_total` on counters. What
/// `bridge/health` has that no row below names (a section added later, the fleet's, the
/// peripheral role's) is still exported, as `gattway_<section>_<key>` gauges.
enum MetricsExporter {
    /// What the exporter reads besides `bridge/health`.
    struct Inputs {
        var health: JSONValue
        var devices: [DeviceSnapshot]
        /// The MQTT client's publishes waiting (in flight and queued behind), its limit, and the
        /// publishes it refused because the queue was full.
        var mqttBacklog: Int
        var mqttBacklogLimit: Int?
        var freeSlots: Int
        var maxConnections: Int
        var web: WebCounters.Figures
    }

    /// `bridge/health` members with a name of their own: path → (name, kind, help, scale).
    private static let named: [(path: [String], name: String, kind: PrometheusText.Kind, help: String, scale: Double)] =
        [
            (["uptime_s"], "gattway_uptime_seconds", .gauge, "Seconds since the gateway started.", 1),
            (
                ["process", "rss_bytes"], "gattway_process_resident_memory_bytes", .gauge,
                "Resident memory of the process.", 1
            ),
            (
                ["process", "cpu_seconds"], "gattway_process_cpu_seconds_total", .counter,
                "CPU time of the process (user and system).", 1
            ),
            (
                ["advertisements"], "gattway_advertisements_total", .counter, "Advertisement reports the core handled.",
                1
            ),
            (
                ["notifications"], "gattway_notifications_total", .counter,
                "GATT notification values the core handled.", 1
            ),
            (["decoded"], "gattway_decoded_total", .counter, "Reports and values a parser decoded.", 1),
            (["parse_errors"], "gattway_parse_errors_total", .counter, "Reports and values a parser failed on.", 1),
            (["published"], "gattway_published_messages_total", .counter, "MQTT messages the core published.", 1),
            (
                ["queue", "depth"], "gattway_store_forward_queue_messages", .gauge,
                "Messages waiting in the store-and-forward queue.", 1
            ),
            (
                ["queue", "bytes"], "gattway_store_forward_queue_bytes", .gauge,
                "Bytes waiting in the store-and-forward queue.", 1
            ),
            (
                ["queue", "queued"], "gattway_store_forward_queued_total", .counter,
                "Messages the store-and-forward stage queued.", 1
            ),
            (
                ["queue", "spilled"], "gattway_store_forward_spilled_total", .counter,
                "Messages written to the queue file.", 1
            ),
            (
                ["queue", "replayed"], "gattway_store_forward_replayed_total", .counter,
                "Queued messages published after a reconnect.", 1
            ),
            (
                ["queue", "write_errors"], "gattway_store_forward_write_errors_total", .counter,
                "Failed writes of the queue file.", 1
            ),
            (
                ["store_and_forward", "durable"], "gattway_store_forward_durable", .gauge,
                "1 when the queue is kept in a file.", 1
            ),
            (
                ["store_and_forward", "memory_only"], "gattway_store_forward_memory_only_messages", .gauge,
                "Queued messages held in memory only.", 1
            ),
            (
                ["store_and_forward", "free_bytes"], "gattway_store_forward_free_bytes", .gauge,
                "Free bytes of the state directory's file system.", 1
            ),
            (["devices"], "gattway_devices", .gauge, "Devices in the registry.", 1),
            (["connections"], "gattway_connections", .gauge, "GATT links up.", 1),
            (
                ["parked"], "gattway_parked_devices", .gauge,
                "Devices whose connects are parked after repeated failures.", 1
            ),
            (["connects"], "gattway_connects_total", .counter, "Successful connects.", 1),
            (["reconnects"], "gattway_reconnects_total", .counter, "Connects after a lost link.", 1),
            (["connect_failures"], "gattway_connect_failures_total", .counter, "Failed connects.", 1),
            (["disconnects"], "gattway_disconnects_total", .counter, "Links that went down.", 1),
            (["commands"], "gattway_commands_total", .counter, "Commands run.", 1),
            (["command_errors"], "gattway_command_errors_total", .counter, "Commands that failed.", 1),
            (["ble_latency_ms"], "gattway_ble_latency_seconds", .gauge, "Last round trip to bluetoothd.", 0.001),
            (
                ["radio", "reports"], "gattway_radio_reports_total", .counter,
                "Reports read from the kernel's management socket.", 1
            ),
            (
                ["radio", "dropped_packets"], "gattway_radio_dropped_packets_total", .counter,
                "Management packets that could not be read.", 1
            ),
        ]

    /// Top-level `bridge/health` members written by hand below (or not numbers to export).
    private static let handled: Set<String> = ["dropped", "adapter", "timestamp", "radio", "web"]

    static func render(_ inputs: Inputs) -> [UInt8] {
        var text = PrometheusText()
        let health = inputs.health
        var covered: Set<[String]> = []
        for row in named {
            covered.insert(row.path)
            guard let value = number(health, row.path) else { continue }
            text.single(row.name, row.kind, help: row.help, value * row.scale)
        }
        if case .object(let drops)? = member(health, ["dropped"]), !drops.isEmpty {
            text.family("gattway_dropped_total", .counter, help: "Reports, values and messages dropped, by reason.")
            for (reason, value) in drops { if let count = numberOf(value) { text.sample([("reason", reason)], count) } }
        }
        adapters(health, into: &text)
        devices(inputs, into: &text)
        text.single(
            "gattway_connection_slots", .gauge, help: "Connection slots (bluetooth.max_connections).",
            Double(inputs.maxConnections))
        text.single(
            "gattway_connection_slots_free", .gauge, help: "Connection slots free now (the gateway's and the proxy's).",
            Double(inputs.freeSlots))
        text.single(
            "gattway_mqtt_backlog_messages", .gauge, help: "Publishes the MQTT client holds (in flight and waiting).",
            Double(inputs.mqttBacklog))
        if let limit = inputs.mqttBacklogLimit {
            text.single(
                "gattway_mqtt_backlog_limit_messages", .gauge,
                help: "The most publishes the MQTT client holds (mqtt.max_queued).", Double(limit))
        }
        web(inputs.web, into: &text)
        // Everything else bridge/health has, so nothing in it is missing here.
        if case .object(let members) = health {
            for (key, value) in members where !handled.contains(key) {
                generic([key], value, covered: covered, into: &text)
            }
        }
        return text.bytes
    }

    private static func adapters(_ health: JSONValue, into text: inout PrometheusText) {
        guard case .array(let adapters)? = member(health, ["radio", "adapters"]), !adapters.isEmpty else { return }
        text.family("gattway_adapter_reports_total", .counter, help: "Advertisement reports per adapter.")
        for adapter in adapters {
            guard let name = stringOf(adapter["name"]), let reports = numberOf(adapter["reports"]) else { continue }
            text.sample([("adapter", name)], reports)
        }
        text.family("gattway_adapter_state", .gauge, help: "1 for each adapter's condition now (state label).")
        for adapter in adapters {
            guard let name = stringOf(adapter["name"]), let state = stringOf(adapter["state"]) else { continue }
            text.sample([("adapter", name), ("state", state)], 1)
        }
    }

    private static func devices(_ inputs: Inputs, into text: inout PrometheusText) {
        let devices = inputs.devices
        guard !devices.isEmpty else { return }
        func labels(_ device: DeviceSnapshot) -> [(name: String, value: String)] {
            [("name", device.name), ("address", device.address)]
        }
        text.family("gattway_device_rssi_dbm", .gauge, help: "Last RSSI of a device.")
        for device in devices { if let rssi = device.rssi { text.sample(labels(device), Double(rssi)) } }
        text.family(
            "gattway_device_last_seen_timestamp_seconds", .gauge, help: "When a device was last heard (Unix time).")
        for device in devices {
            if let seen = device.lastSeenMilliseconds { text.sample(labels(device), Double(seen) / 1000) }
        }
        text.family(
            "gattway_device_info", .gauge,
            help: "1 for each device, with the name it advertises (local_name, untrusted).")
        for device in devices { text.sample(labels(device) + [("local_name", device.localName ?? "")], 1) }
        text.family("gattway_device_connected", .gauge, help: "1 while the gateway holds a GATT link to a device.")
        for device in devices { text.sample(labels(device), device.connected ? 1 : 0) }
    }

    private static func web(_ figures: WebCounters.Figures, into text: inout PrometheusText) {
        text.single(
            "gattway_web_requests_total", .counter, help: "Requests the web server answered.", Double(figures.requests))
        text.family("gattway_web_refused_total", .counter, help: "Requests the web server refused, by reason.")
        for (reason, count) in figures.refusedByReason { text.sample([("reason", reason)], Double(count)) }
        text.single(
            "gattway_web_event_clients", .gauge, help: "Event-stream clients connected.", Double(figures.eventClients))
        text.single(
            "gattway_web_event_clients_dropped_total", .counter,
            help: "Event-stream clients dropped for reading too slowly.",
            Double(figures.eventClientsDropped))
    }

    /// A member not named above: numbers and booleans as gauges named by their path.
    private static func generic(
        _ path: [String], _ value: JSONValue, covered: Set<[String]>, into text: inout PrometheusText
    ) {
        guard !covered.contains(path) else { return }
        switch value {
        case .object(let members):
            for (key, member) in members { generic(path + [key], member, covered: covered, into: &text) }
        case .number(let number):
            text.single(metricName(path), .gauge, help: "bridge/health " + path.joined(separator: "."), number)
        case .bool(let flag):
            text.single(
                metricName(path), .gauge, help: "bridge/health " + path.joined(separator: ".") + " (1: true)",
                flag ? 1 : 0)
        default:
            break
        }
    }

    /// `gattway_` and the path, each character that may not be in a name as `_`.
    static func metricName(_ path: [String]) -> String {
        let joined = path.joined(separator: "_")
        let safe = joined.unicodeScalars.map { scalar -> Character in
            let ok =
                ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || ("0"..."9").contains(scalar)
                || scalar == "_"
            return ok ? Character(scalar) : "_"
        }
        return "gattway_" + String(safe)
    }

    private static func numberOf(_ value: JSONValue?) -> Double? {
        if case .number(let number)? = value { number } else { nil }
    }

    private static func stringOf(_ value: JSONValue?) -> String? {
        if case .string(let text)? = value { text } else { nil }
    }

    private static func member(_ value: JSONValue, _ path: [String]) -> JSONValue? {
        var current = value
        for key in path {
            guard let next = current[key] else { return nil }
            current = next
        }
        return current
    }

    private static func number(_ value: JSONValue, _ path: [String]) -> Double? {
        switch member(value, path) {
        case .number(let number)?: number
        case .bool(let flag)?: flag ? 1 : 0
        default: nil
        }
    }
}
