import Bluetooth
import Foundation
import Gateway
import Testing

@Suite("config.json")
struct ConfigTests {
    static let repoRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    @Test("the repo's config.json is the working default: 180F scan, connect, 2A19 subscription, local broker")
    func repoDefault() throws {
        let config = try GatewayConfig.load(path: Self.repoRoot.appendingPathComponent("config.json").path)
        #expect(config.mqtt.server == "mqtt://127.0.0.1:1883")
        #expect(config.mqtt.baseTopic == "gattway")
        #expect(config.mqtt.qos == 1)
        #expect(config.mqtt.retain == false)
        #expect(config.bluetooth.scanServices == [BluetoothUUID(0x180F)])
        #expect(config.devices.count == 1)
        #expect(config.devices[0].connect)
        #expect(config.devices[0].subscribe.first?.characteristic == BluetoothUUID(0x2A19))
        #expect(config.devices[0].subscribe.first?.parser.name == "battery_level")
    }

    @Test("an empty object is valid and takes every default")
    func defaults() throws {
        let config = try GatewayConfig.parse(Array("{}".utf8))
        #expect(config.bluetooth.maxConnections == 3)
        #expect(config.bluetooth.connectTimeout == 30)
        #expect(config.commands.ttl == 30)
        #expect(config.availability.fallbackTimeout == 600)
        #expect(config.devices.isEmpty)
        #expect(config.mqtt.maxQueued == 10_000)
        #expect(try GatewayConfig.parse(Array(#"{"mqtt": {"max_queued": 500}}"#.utf8)).mqtt.maxQueued == 500)
        #expect(throws: (any Error).self) { try GatewayConfig.parse(Array(#"{"mqtt": {"max_queued": -1}}"#.utf8)) }
    }

    @Test("every problem is reported at once, each with its JSON path and what was expected")
    func collectsErrors() {
        let text = """
            {"mqtt": {"server": "http://x", "qos": 3, "colour": "red", "base_topic": "gw/#"},
             "homeassistant": {"discovery_prefix": "/ha"},
             "bluetooth": {"scan": {"services": ["180F", "zz"]}, "connect_timeout": "soon"},
             "devices": [
               {"match": {"address": "AA:BB"}, "connect": "yes"},
               {"match": {"services": ["180F"]}, "name": "kitchen", "subscribe": [{"characteristic": "2A19", "parser": "nope"}]},
               {"commands": {"led": {"characteristic": "FFF1", "encoding": "u12"}}, "min_interval": "fast"}
             ]}
            """
        do {
            _ = try GatewayConfig.parse(Array(text.utf8))
            Issue.record("expected errors")
        } catch {
            let lines = error.lines
            let expected = [
                "mqtt.server: \"http://x\" is not a broker URL (expected mqtt://host:port or mqtts://host:port)",
                "mqtt.qos: expected an integer from 0 to 2, got 3",
                "mqtt.base_topic: \"gw/#\" is not a base topic (expected topic levels without wildcards or leading/trailing \"/\", e.g. \"gattway\")",
                "homeassistant.discovery_prefix: \"/ha\" is not a topic prefix (expected topic levels without wildcards or leading/trailing \"/\")",
                "bluetooth.scan.services[1]: \"zz\" is not a Bluetooth UUID",
                "bluetooth.connect_timeout: expected a duration",
                "devices[0].match.address: \"AA:BB\" is not a Bluetooth address (expected six hex octets, e.g. A4:C1:38:0B:12:34)",
                "devices[0].connect: expected true or false, got \"yes\"",
                "devices[1].subscribe[0].parser: \"nope\" is not a characteristic parser",
                "devices[1].name: a friendly name needs match.address naming exactly one device",
                "devices[1].connect: must be true when subscribe or poll is given",
                "devices[2].commands.led.encoding: \"u12\" is not an encoding",
                "devices[2].min_interval: expected a duration",
            ]
            for prefix in expected {
                #expect(
                    lines.contains { $0.hasPrefix(prefix) }, "missing: \(prefix)\nin:\n\(lines.joined(separator: "\n"))"
                )
            }
            #expect(
                lines.contains {
                    $0.hasPrefix(
                        "mqtt.colour: is not a known key (expected one of server, alternate_servers, base_topic")
                })
            #expect(lines.count == expected.count + 1, "\(lines.joined(separator: "\n"))")
        }
    }

    @Test("the broker password can come from a file (first line), never together with password")
    func passwordFile() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("gattway-pw-\(UUID().uuidString)").path
        try Data("s3cret-pass\n".utf8).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let config = try GatewayConfig.parse(Array(#"{"mqtt": {"username": "gw", "password_file": "\#(path)"}}"#.utf8))
        #expect(config.mqtt.password == "s3cret-pass")
        #expect(config.secrets.contains("s3cret-pass"), "a password from a file is redacted from logs like any other")
        let cases: [(String, String)] = [
            (
                #"{"mqtt": {"username": "gw", "password": "x", "password_file": "\#(path)"}}"#,
                "mqtt.password_file: give either password or password_file"
            ),
            (
                #"{"mqtt": {"username": "gw", "password_file": "/nonexistent/pw"}}"#,
                "mqtt.password_file: cannot read \"/nonexistent/pw\""
            ),
            (#"{"mqtt": {"password_file": "\#(path)"}}"#, "mqtt.password_file: needs username"),
        ]
        for (text, message) in cases {
            do {
                _ = try GatewayConfig.parse(Array(text.utf8))
                Issue.record("accepted: \(text)")
            } catch {
                #expect(error.lines.contains { $0.hasPrefix(message) }, "\(error.lines)")
            }
        }
    }

    @Test("malformed JSON is one error with the byte offset")
    func malformed() {
        #expect(throws: GatewayConfigError.self) { try GatewayConfig.parse(Array("{\"mqtt\": }".utf8)) }
    }

    @Test("declarative parsers: unknown keys and bad fields are path-named; good ones become usable parsers")
    func declarativeParsers() throws {
        let bad = """
            {"parsers": {"mine": {"fields": [{"name": "t", "offset": 0, "type": "u12", "sacle": 2}]}}}
            """
        do {
            _ = try GatewayConfig.parse(Array(bad.utf8))
            Issue.record("expected errors")
        } catch {
            #expect(error.lines.contains { $0.hasPrefix("parsers.mine.fields[0].sacle: is not a known key") })
            #expect(error.lines.contains { $0.hasPrefix("parsers.mine.fields[0].type: \"u12\" is not a field type") })
        }
        let good = """
            {"parsers": {"mine": {"fields": [{"name": "temperature", "offset": 0, "type": "s16le", "scale": 0.01}]}},
             "devices": [{"match": {"address": "A4:C1:38:00:00:01"}, "name": "lab", "connect": true,
                          "subscribe": [{"characteristic": "FFF1", "parser": "mine"}]}]}
            """
        let config = try GatewayConfig.parse(Array(good.utf8))
        #expect(config.devices[0].subscribe[0].parser.name == "mine")
        let value = try config.devices[0].subscribe[0].parser.decode([0xCA, 0x09]).first?.value.number ?? 0
        #expect(abs(value - 25.06) < 1e-9)
    }

    @Test("friendly names are unique and one topic level")
    func names() {
        let text = """
            {"devices": [{"match": {"address": "A4:C1:38:00:00:01"}, "name": "a/b"},
                         {"match": {"address": "A4:C1:38:00:00:02"}, "name": "x"},
                         {"match": {"address": "A4:C1:38:00:00:03"}, "name": "x"}]}
            """
        do {
            _ = try GatewayConfig.parse(Array(text.utf8))
            Issue.record("expected errors")
        } catch {
            #expect(error.lines.contains { $0.hasPrefix("devices[0].name: \"a/b\" is not a device name") })
            #expect(error.lines.contains { $0 == "devices[2].name: \"x\" is already the name of devices[1]" })
        }
    }

    @Test("connection_params: milliseconds in the Core spec's steps and ranges; a bad value names its field")
    func connectionParams() throws {
        let good = try GatewayConfig.parse(
            Array(
                #"{"devices": [{"connection_params": {"min_interval_ms": 7.5, "max_interval_ms": 15, "supervision_timeout_ms": 4000}}]}"#
                    .utf8))
        #expect(
            good.devices[0].connectionParameters
                == ConnectionParameters(minInterval: 6, maxInterval: 12, latency: 0, supervisionTimeout: 400))
        let cases: [(String, String)] = [
            (
                #"{"min_interval_ms": 7, "max_interval_ms": 15, "supervision_timeout_ms": 4000}"#,
                "devices[0].connection_params.min_interval_ms: expected milliseconds, a multiple of 1.25 ms, got 7.0"
            ),
            (
                #"{"min_interval_ms": 5, "max_interval_ms": 15, "supervision_timeout_ms": 4000}"#,
                "devices[0].connection_params: min_interval_ms 5 ms is outside 7.5–4000 ms"
            ),
            (
                #"{"min_interval_ms": 30, "max_interval_ms": 15, "supervision_timeout_ms": 4000}"#,
                "devices[0].connection_params: min_interval_ms 30 ms is more than max_interval_ms 15 ms"
            ),
            (
                #"{"min_interval_ms": 7.5, "max_interval_ms": 15, "latency": 500, "supervision_timeout_ms": 4000}"#,
                "devices[0].connection_params.latency: expected an integer from 0 to 499, got 500"
            ),
            (
                #"{"min_interval_ms": 7.5, "max_interval_ms": 100, "latency": 4, "supervision_timeout_ms": 1000}"#,
                "devices[0].connection_params: supervision_timeout_ms 1000 ms must be longer than (1 + latency) × max_interval_ms × 2 = 1000 ms"
            ),
            (
                #"{"min_interval_ms": 7.5, "max_interval_ms": 15, "supervision_timeout_ms": 40000}"#,
                "devices[0].connection_params: supervision_timeout_ms 40000 ms is outside 100–32000 ms"
            ),
            (
                #"{"min_interval_ms": 7.5, "max_interval_ms": 15}"#,
                "devices[0].connection_params.supervision_timeout_ms: is required (milliseconds, 100 to 32000)"
            ),
        ]
        for (params, line) in cases {
            do {
                _ = try GatewayConfig.parse(Array(#"{"devices": [{"connection_params": \#(params)}]}"#.utf8))
                Issue.record("expected an error for \(params)")
            } catch {
                #expect(error.lines == [line])
            }
        }
    }

    @Test("thresholds switch only_changes on unless it is given")
    func thresholdsImplyOnlyChanges() throws {
        let config = try GatewayConfig.parse(
            Array(
                #"{"devices": [{"thresholds": {"temperature": 0.2}}, {"thresholds": {"temperature": 0.2}, "only_changes": false}]}"#
                    .utf8))
        #expect(config.devices[0].rateControl.onlyChanges)
        #expect(!config.devices[1].rateControl.onlyChanges)
    }
}

@Suite("Config: durations are bounded")
struct DurationBoundTests {
    @Test(
        "a duration over 365 days (or not finite) is refused with its path and the bound",
        arguments: [
            (#"{"commands": {"ttl": "1e17s"}}"#, "commands.ttl"),
            (#"{"commands": {"ttl": 1e17}}"#, "commands.ttl"),
            (#"{"bluetooth": {"connect_timeout": "32000000000ms"}}"#, "bluetooth.connect_timeout"),
            (#"{"health": {"interval": "8761h"}}"#, "health.interval"),
        ])
    func refused(text: String, path: String) {
        do {
            let config = try GatewayConfig.parse(Array(text.utf8))
            Issue.record("accepted \(text): ttl \(config.commands.ttl)")
        } catch {
            let problem = error.problems.first { $0.path == path }
            #expect(problem != nil, "\(error.problems)")
            #expect(problem?.message.contains("at most 365 days") == true, "\(problem?.message ?? "")")
        }
    }

    @Test("a number too large for a double (1e999) is refused by the JSON reader")
    func infinite() {
        #expect(throws: GatewayConfigError.self) {
            try GatewayConfig.parse(Array(#"{"commands": {"ttl": 1e999}}"#.utf8))
        }
    }

    @Test("365 days itself is accepted")
    func limit() throws {
        let config = try GatewayConfig.parse(Array(#"{"commands": {"ttl": "8760h"}}"#.utf8))
        #expect(config.commands.ttl == 365 * 86400)
    }
}

@Suite("Config: bluetooth.report_batch")
struct ReportBatchConfigTests {
    @Test("absent: the default; \"0ms\" turns batching off; a duration up to 100 ms is taken")
    func accepted() throws {
        #expect(try GatewayConfig.parse(Array("{}".utf8)).bluetooth.reportBatch == BluetoothSettings.defaultReportBatch)
        #expect(BluetoothSettings.defaultReportBatch > 0)
        for (text, seconds) in [(#""0ms""#, 0.0), ("0", 0), (#""20ms""#, 0.02), (#""100ms""#, 0.1), ("0.05", 0.05)] {
            let config = try GatewayConfig.parse(Array(#"{"bluetooth": {"report_batch": \#(text)}}"#.utf8))
            #expect(config.bluetooth.reportBatch == seconds, "\(text)")
        }
    }

    @Test(
        "a negative, longer than 100 ms or not-a-duration report_batch is refused with its path",
        arguments: [#""101ms""#, #""1s""#, "-1", #""-5ms""#, #""soon""#, "true"])
    func refused(text: String) {
        do {
            let config = try GatewayConfig.parse(Array(#"{"bluetooth": {"report_batch": \#(text)}}"#.utf8))
            Issue.record("accepted \(text): \(config.bluetooth.reportBatch)")
        } catch {
            #expect(error.problems.contains { $0.path == "bluetooth.report_batch" }, "\(error.problems)")
        }
    }
}
