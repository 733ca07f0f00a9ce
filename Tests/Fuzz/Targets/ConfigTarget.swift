import Bluetooth
import Gateway
import JSON

extension FuzzTargets {
    /// config.json bytes through ``GatewayConfig/parse(_:)`` (what `gattway run` and `gattway
    /// config check` do). Properties: no trap; a rejected file has at least one problem and every
    /// problem a message; an accepted file's limits are within the ranges docs/config.md gives and
    /// its durations are from 0 to 365 days (`"commands": {"ttl": "1e17s"}` passed config check
    /// before the bound: fixture `commands-ttl-1e17s`).
    static let config = FuzzTarget(
        name: "config",
        summary: "config.json bytes through GatewayConfig.parse; accepted values within documented bounds",
        seeds: { ConfigSeeds.all },
        run: { bytes in
            guard let config = parsedConfig(bytes) else { return }
            checkBounds(config)
        })

    /// config.json bytes parsed; nil when rejected, which must come with problems that each have
    /// a message.
    static func parsedConfig(_ bytes: [UInt8]) -> GatewayConfig? {
        do throws(GatewayConfigError) {
            return try GatewayConfig.parse(bytes)
        } catch {
            fuzzProperty(!error.problems.isEmpty, "a rejected config without a problem")
            for problem in error.problems {
                fuzzProperty(!problem.message.isEmpty, "a config problem without a message at \(problem.path)")
            }
            return nil
        }
    }

    /// docs/config.md's ranges, for a config that parsed.
    static func checkBounds(_ config: GatewayConfig) {
        func limit(_ value: Int, _ range: ClosedRange<Int>, _ key: String) {
            fuzzProperty(range.contains(value), "\(key) = \(value) is outside \(range)")
        }
        func duration(_ value: Double, _ key: String) {
            fuzzProperty(
                value >= 0 && value <= DurationText.maximumSeconds,
                "\(key) = \(value) is not a duration from 0 to 365 days")
        }
        limit(config.mqtt.qos, 0...2, "mqtt.qos")
        limit(config.mqtt.maxQueued, 0...10_000_000, "mqtt.max_queued")
        let raw = config.mqtt.rawAdvertisements
        limit(raw.maxAddresses, 1...100_000, "mqtt.raw_advertisements.max_addresses")
        fuzzProperty(
            raw.interval >= 0 && raw.interval <= 3600, "mqtt.raw_advertisements.interval = \(raw.interval)")
        fuzzProperty(raw.window >= 1 && raw.window <= 86_400, "mqtt.raw_advertisements.window = \(raw.window)")
        duration(config.mqtt.keepalive, "mqtt.keepalive")
        fuzzProperty(
            config.mqtt.keepalive == 0 || (5...65535).contains(config.mqtt.keepalive),
            "mqtt.keepalive = \(config.mqtt.keepalive)")
        limit(config.bluetooth.maxConnections, 1...32, "bluetooth.max_connections")
        limit(config.bluetooth.maxDevices, 1...100_000, "bluetooth.max_devices")
        if let threshold = config.bluetooth.rssiThreshold {
            limit(threshold, -127...20, "bluetooth.scan.rssi_threshold")
        }
        duration(config.bluetooth.connectTimeout, "bluetooth.connect_timeout")
        duration(config.bluetooth.gattTimeout, "bluetooth.gatt_timeout")
        duration(config.bluetooth.forgetAfter, "bluetooth.forget_after")
        limit(config.bluetooth.parkAfter, 0...1000, "bluetooth.park_after")
        duration(config.bluetooth.parkedRetry, "bluetooth.parked_retry")
        fuzzProperty(
            config.bluetooth.reportBatch >= 0 && config.bluetooth.reportBatch <= BluetoothSettings.maxReportBatch,
            "bluetooth.report_batch = \(config.bluetooth.reportBatch) is not from 0 to 100 ms")
        fuzzProperty(
            config.bluetooth.pairingTimeout >= 1
                && config.bluetooth.pairingTimeout <= BluetoothSettings.maxPairingTimeout,
            "bluetooth.pairing_timeout = \(config.bluetooth.pairingTimeout) is not from 1 to 55 s")
        limit(config.availability.missedIntervals, 1...1000, "availability.missed_intervals")
        duration(config.availability.minimumTimeout, "availability.minimum_timeout")
        duration(config.availability.fallbackTimeout, "availability.fallback_timeout")
        duration(config.commands.ttl, "commands.ttl")
        duration(config.commands.idleDisconnect, "commands.idle_disconnect")
        limit(config.commands.maxPayloadBytes, 16...262_144, "commands.max_payload_bytes")
        limit(config.commands.queueLimit, 1...1000, "commands.queue_limit")
        limit(config.storeAndForward.maxMessages, 1...10_000_000, "store_and_forward.max_messages")
        limit(config.storeAndForward.maxBytes, 1024...(1 << 40), "store_and_forward.max_bytes")
        duration(config.storeAndForward.maxAge, "store_and_forward.max_age")
        duration(config.health.interval, "health.interval")
        fuzzProperty(config.health.interval >= 1, "health.interval = \(config.health.interval) is below 1 s")
        duration(config.homeAssistant.republishDelay, "homeassistant.republish_delay")
        duration(config.homeAssistant.stateDelay, "homeassistant.state_delay")
        let proxy = config.bluetoothProxy
        limit(proxy.maxClients, 1...64, "bluetooth_proxy.max_clients")
        limit(proxy.connectionSlots, 0...32, "bluetooth_proxy.connection_slots")
        fuzzProperty(proxy.port > 0, "bluetooth_proxy.listen port 0")
        fuzzProperty(proxy.encryptionKey.map { $0.count == 32 } ?? true, "bluetooth_proxy.encryption_key not 32 bytes")
        fuzzProperty(
            !proxy.enabled || proxy.encryptionKey != nil || proxy.plaintext || proxy.provisioning,
            "bluetooth_proxy enabled without a key, plaintext or provisioning")
        fuzzProperty(!(proxy.plaintext && proxy.encryptionKey != nil), "bluetooth_proxy plaintext with a key")
        if let name = proxy.name {
            fuzzProperty(!name.isEmpty && name.utf8.count <= 31, "bluetooth_proxy.name \(name)")
        }
        var names = Set<String>()
        for rule in config.devices {
            if let name = rule.name { fuzzProperty(names.insert(name).inserted, "two device rules named \(name)") }
            if let parameters = rule.connectionParameters {
                fuzzProperty(parameters.problem() == nil, "connection_params the Core spec refuses: \(parameters)")
            }
        }
    }
}

/// Seeds for ``FuzzTargets/config``: the repository's config.json, every JSON block of docs/*.md
/// (fragments such as `"mqtt": {…}` made into objects), and the configs the Gateway tests write.
enum ConfigSeeds {
    static let all: [[UInt8]] = {
        var seeds: [[UInt8]] = []
        if let bytes = FixtureFiles.repositoryFile("config.json") { seeds.append(bytes) }
        for path in FixtureFiles.repositoryFiles(in: "docs", suffix: ".md") {
            for block in FixtureFiles.markdownJSONBlocks(path) {
                let first = block.first { $0 != 0x20 && $0 != 0x0A }
                seeds.append(first == UInt8(ascii: "\"") ? Array("{".utf8) + block + Array("}".utf8) : block)
            }
        }
        for path in FixtureFiles.repositoryFiles(in: "Tests/GatewayTests", suffix: ".swift") {
            seeds += FixtureFiles.swiftJSONLiterals(path).filter { literal in
                // Configs, not MQTT payloads: at least one of the config's sections.
                let text = String(decoding: literal, as: UTF8.self)
                return [
                    "\"mqtt\"", "\"devices\"", "\"bluetooth\"", "\"parsers\"", "\"peripheral\"",
                    "\"store_and_forward\"",
                ]
                .contains { text.contains($0) }
            }
        }
        return seeds
    }()
}
