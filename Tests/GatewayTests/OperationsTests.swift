import Bluetooth
import Gateway
import JSON
import Synchronization
import Testing

/// Collects log lines for assertions.
final class LogCapture: Sendable {
    private let lines = Mutex<[String]>([])
    var all: [String] { lines.withLock { $0 } }
    var logger: GatewayLogger {
        GatewayLogger.syslog(minimum: .debug) { text in self.lines.withLock { $0.append(text) } }
    }
}

@Suite("Health, logging and the command rate limit")
struct OperationsTests {
    static let sensor = address("A4:C1:38:00:00:01")

    @Test("bridge/health every interval on the clock with uptime, RSS, CPU, counters, drops by reason and the queue")
    func health() async throws {
        let cpu = Mutex(1.0)
        let harness = try Harness(
            #"{"health": {"interval": "30s"}, "bluetooth": {"scan": {"rssi_threshold": -80}}, "devices": [{"match": {"services": ["FCD2"]}}]}"#,
            processSample: {
                ProcessSample(
                    residentBytes: 12_345_678,
                    cpuSeconds: cpu.withLock {
                        $0 += 1.5; return $0
                    })
            })
        try await harness.start()
        await harness.gateway.handle(bthome(Self.sensor))
        await harness.gateway.handle(bthome(Self.sensor, rssi: -95))
        harness.mqtt.queueFullDrops = 7
        await harness.advance(29.9)
        #expect(harness.mqtt.messages(on: "gattway/bridge/health").isEmpty)
        await harness.advance(0.1)
        await harness.advance(30)
        let messages = harness.mqtt.messages(on: "gattway/bridge/health")
        #expect(messages.count == 2)
        #expect(messages.allSatisfy { !$0.retain })
        let health = try #require(json(messages.last?.payloadText ?? ""))
        #expect(health["uptime_s"] == .number(60))
        #expect(health["process"]?["rss_bytes"] == .number(12_345_678))
        #expect(health["process"]?["cpu_percent"] == .number(5), "1.5 s of CPU in 30 s")
        #expect(health["advertisements"] == .number(2))
        #expect(health["decoded"] == .number(1))
        #expect(health["dropped"]?["filtered"] == .number(1))
        #expect(health["dropped"]?["mqtt_queue_full"] == .number(7), "the MQTT client's queue-full drops")
        #expect(health["queue"]?["depth"] == .number(0))
        #expect(health["connections"] == .number(0))
        #expect(health["devices"] == .number(1))
        #expect(health["ble_latency_ms"] == .null)
        for key in ["notifications", "published", "reconnects", "timestamp"] {
            #expect(health[key] != nil, "no \(key)")
        }
    }

    @Test("RSS and CPU time from /proc/self (a command name with spaces and parentheses)")
    func processSample() throws {
        let stat =
            "4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 3 0 100 1000000 500 18446744073709551615"
        let sample = ProcessSample.parse(
            status: "Name:\tx\nVmRSS:\t   20480 kB\nThreads: 3\n", stat: stat, ticksPerSecond: 100)
        #expect(sample == ProcessSample(residentBytes: 20_971_520, cpuSeconds: 3))
        #expect(ProcessSample.parse(status: "Name: x\n", stat: stat, ticksPerSecond: 100) == nil)
        let current = try #require(ProcessSample.current())
        #expect(current.residentBytes > 1_000_000)
    }

    @Test("log lines carry <N> syslog prefixes per line; levels below the minimum are dropped; --log-level names parse")
    func syslogLines() {
        #expect(GatewayLogger.syslogLines(.warning, "a\nb") == "<4>a\n<4>b\n")
        let capture = Mutex<[String]>([])
        let logger = GatewayLogger.syslog(minimum: .notice) { text in capture.withLock { $0.append(text) } }
        logger(.error, "bad")
        logger(.info, "chatty")
        logger(.debug, "chattier")
        #expect(capture.withLock { $0 } == ["<3>bad\n"])
        #expect(GatewayLogger.Level(name: "WARN") == .warning && GatewayLogger.Level(name: "debug") == .debug)
        #expect(GatewayLogger.Level(name: "loud") == nil)
    }

    @Test("a config with a password (also in the URL) and a bind key never shows them in a log line")
    func secretsNeverLogged() async throws {
        let capture = LogCapture()
        let config = """
            {"mqtt": {"server": "mqtt://bob:url-s3cret@broker:1883", "username": "bob", "password": "hunter2-pa55"},
             "devices": [{"match": {"services": ["FCD2"]}, "bindkey": "231d39c1d7cc1ab1aee224cd096db932"}]}
            """
        let harness = try Harness(config, logger: capture.logger)
        try await harness.start()
        await harness.gateway.handle(bthome(Self.sensor, payload: [0x41, 0x00]))
        await harness.gateway.stop()
        let lines = capture.all
        #expect(lines.contains { $0.contains("***") }, "the configuration line is logged, redacted")
        for secret in [
            "hunter2-pa55", "url-s3cret", "231d39c1d7cc1ab1aee224cd096db932", "231D39C1D7CC1AB1AEE224CD096DB932",
        ] {
            #expect(!lines.contains { $0.contains(secret) }, "\(secret) leaked")
        }
        #expect(lines.allSatisfy { $0.hasPrefix("<") })
        #expect(harness.config.secrets.contains("hunter2-pa55"))
    }

    static let lampConfig = """
        {"commands": {"rate_limit": {"burst": 2, "interval": "10s"}},
         "devices": [{"match": {"address": "A4:C1:38:00:00:10"}, "name": "lamp",
                      "commands": {"brightness": {"characteristic": "FFF1", "encoding": "u8"}}}]}
        """

    @Test(
        "commands.rate_limit: a token bucket per device; a refused command answers error \"rate limited\" and writes nothing"
    )
    func rateLimit() async throws {
        let lamp = address("A4:C1:38:00:00:10")
        let harness = try Harness(Self.lampConfig)
        harness.ble.add(
            lamp,
            .init(characteristics: [
                BLECharacteristic(service: BluetoothUUID(0xFFF0), uuid: BluetoothUUID(0xFFF1), properties: [.write])
            ]))
        try await harness.start()
        var statuses: [JSONValue?] = []
        for value in 1...3 {
            let responses = await harness.command(
                "gattway/lamp/set", #"{"brightness": \#(value), "transaction": \#(value)}"#,
                responseTopic: "gattway/lamp/response")
            statuses.append(json(responses.last?.payloadText ?? "")?["status"])
        }
        #expect(statuses == [.string("ok"), .string("ok"), .string("error")])
        let refused = json(harness.mqtt.payloads(on: "gattway/lamp/response").last ?? "")
        #expect(refused?["transaction"] == .number(3))
        if case .string(let text)? = refused?["error"] {
            #expect(text.hasPrefix("rate limited"))
        } else {
            Issue.record("no error text")
        }
        #expect(harness.ble.writes.filter { $0.hasPrefix("write-begin") }.count == 2)
        #expect(await harness.gateway.counters.dropped.rateLimited == 1)
        await harness.advance(10)
        let again = await harness.command("gattway/lamp/set/brightness", "4", responseTopic: "gattway/lamp/response")
        #expect(json(again.last?.payloadText ?? "")?["status"] == .string("ok"))
    }

    @Test("rate_limit keys are validated and documented defaults hold")
    func rateLimitConfig() throws {
        #expect(GatewayConfig().commands.rateLimit == RateLimitSettings())
        #expect(GatewayConfig().commands.rateLimit.burst == 10 && GatewayConfig().commands.rateLimit.interval == 1)
        #expect(throws: GatewayConfigError.self) {
            try GatewayConfig.parse(Array(#"{"commands": {"rate_limit": {"burst": 0, "rate": 1}}}"#.utf8))
        }
        let disabled = try GatewayConfig.parse(Array(#"{"commands": {"rate_limit": {"enabled": false}}}"#.utf8))
        #expect(!disabled.commands.rateLimit.enabled)
    }
}

@Suite("Operational config keys")
struct OperationalConfigTests {
    @Test("defaults of homeassistant, store_and_forward, health and the registry bound")
    func defaults() {
        let config = GatewayConfig()
        #expect(config.homeAssistant.enabled && config.homeAssistant.discoveryPrefix == "homeassistant")
        #expect(config.homeAssistant.statusTopic == "homeassistant/status")
        #expect(config.storeAndForward.maxMessages == 100_000 && config.storeAndForward.maxAge == 86_400)
        #expect(
            config.health.interval == 60 && config.bluetooth.forgetAfter == 3600 && config.bluetooth.maxDevices == 1000)
        #expect(config.stateDirectory == nil)
    }

    @Test(
        "bad operational keys are reported with their paths",
        arguments: [
            (#"{"homeassistant": {"discovery_prefix": "ha/#"}}"#, "homeassistant.discovery_prefix"),
            (#"{"homeassistant": {"colour": 1}}"#, "homeassistant.colour"),
            (#"{"store_and_forward": {"max_messages": 0}}"#, "store_and_forward.max_messages"),
            (#"{"store_and_forward": {"max_age": "0s"}}"#, "store_and_forward.max_age"),
            (#"{"health": {"interval": "10ms"}}"#, "health.interval"),
            (#"{"bluetooth": {"max_devices": 0}}"#, "bluetooth.max_devices"),
            (
                #"{"devices": [{"commands": {"m": {"characteristic": "FFF1", "encoding": "u8", "options": ["1"], "press": 1}}}]}"#,
                "devices[0].commands.m"
            ),
        ])
    func problems(text: String, path: String) {
        do {
            _ = try GatewayConfig.parse(Array(text.utf8))
            Issue.record("accepted \(text)")
        } catch {
            #expect(error.problems.contains { $0.path == path }, "\(error.problems)")
        }
    }
}
