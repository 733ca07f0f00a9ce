import BlueZSimulator
import Foundation
import Glibc
import JSON
import Subprocess
import TestSupport
import Testing

/// `gattway run`'s web server (docs/web.md) against the demo world, with curl and promtool as a
/// user and Prometheus would use it: auth, CSRF, the body limit, TLS, the connection limit,
/// `/metrics` in Prometheus's format with the simulator's values, the JSON API and the event stream.
@Suite("End to end: the web server")
struct WebTests {
    static let token = "e2e-web-token-0123456789abcdef"
    /// The heart-rate strap's local name in these tests: a device may advertise anything.
    static let hostileName = "HR \"Strap\"\n\\evil} x=\"1\""

    static func config(port: UInt16, extra: String = "") -> String {
        DemoWorldConfig.text.replacingOccurrences(
            of: #""commands": {"max_payload_bytes": 256},"#,
            with: #"""
                "commands": {"max_payload_bytes": 256},
                "web": {"listen": "127.0.0.1:\#(port)", "auth": {"token": "\#(token)"}\#(extra)},
                """#
        ).replacingOccurrences(
            of: #"{"match": {"address": "C4:D3:8C:12:4A:5F"}, "name": "ruuvi"}"#,
            with:
                #"{"match": {"address": "C4:D3:8C:12:4A:5F"}, "name": "ruuvi"}, {"match": {"address": "A4:C1:38:00:00:06"}}"#
        )
    }

    static func scenario() throws -> Scenario {
        try EndToEnd.fastDemo { scenario in
            for index in scenario.devices.indices
            where scenario.devices[index].address.description == "A4:C1:38:00:00:06" {
                scenario.devices[index].name = hostileName
            }
        }
    }

    /// curl's answer: status and body (headers too with `-i` in `arguments`).
    struct Answer {
        var status: Int
        var body: String
    }

    static func curl(_ arguments: [String]) async throws -> Answer {
        let (_, output) = try await ChildProcess.run(
            "/usr/bin/curl", ["-s", "--max-time", "10", "-w", "\n%{http_code}"] + arguments)
        let lines = output.split(separator: "\n", omittingEmptySubsequences: false)
        return Answer(status: Int(lines.last ?? "") ?? 0, body: lines.dropLast().joined(separator: "\n"))
    }

    static func get(_ port: UInt16, _ path: String, token: String? = WebTests.token, _ more: [String] = []) async throws
        -> Answer
    {
        try await curl(
            (token.map { ["-H", "Authorization: Bearer \($0)"] } ?? []) + more + ["http://127.0.0.1:\(port)\(path)"])
    }

    static func waitForListener(_ port: UInt16) async throws {
        try await AdaptersTests.waitUntil("the web server's listener") { LoopbackPort.accepts(port) }
    }

    @Test(
        "without the token 401, with it 200; /metrics passes promtool and has the simulator's values, a hostile name escaped"
    )
    func authAndMetrics() async throws {
        let port = try LoopbackPort.free()
        let proxyPort = try LoopbackPort.free()
        // Secrets no answer may show: the proxy's key and a device's bind key (and the token).
        let proxyKey = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
        let bindKey = "00112233445566778899aabbccddeeff"
        let config = Self.config(port: port).replacingOccurrences(
            of: #""name": "ruuvi"}"#, with: #""name": "ruuvi", "bindkey": "\#(bindKey)"}"#
        ).replacingOccurrences(
            of: #""commands": {"max_payload_bytes": 256},"#,
            with: #"""
                "commands": {"max_payload_bytes": 256},
                "bluetooth_proxy": {"enabled": true, "listen": "127.0.0.1:\#(proxyPort)", "encryption_key": "\#(proxyKey)"},
                """#)
        try await EndToEnd.run(config: config, scenario: Self.scenario()) { e2e in
            try await Self.waitForListener(port)
            for path in ["/metrics", "/api/health", "/api/devices", "/api/events", "/", "/nowhere"] {
                let refused = try await Self.get(port, path, token: nil)
                #expect(refused.status == 401, "\(path): \(refused)")
                let wrong = try await Self.get(port, path, token: "e2e-web-token-0123456789abcdeX")
                #expect(wrong.status == 401, "\(path) with a wrong token: \(wrong)")
            }
            // The lamp advertises at -70 dBm without jitter; the strap's name is hostile.
            var metrics = Answer(status: 0, body: "")
            try await AdaptersTests.waitUntil("the lamp's RSSI and link and the strap in /metrics") {
                metrics = try await Self.get(port, "/metrics")
                return metrics.body.contains(#"gattway_device_rssi_dbm{name="lamp",address="A4:C1:38:00:00:03"} -70"#)
                    && metrics.body.contains("local_name=")
                    && metrics.body.contains(#"gattway_device_connected{name="lamp",address="A4:C1:38:00:00:03"} 1"#)
            }
            #expect(metrics.status == 200)
            let file = e2e.daemon.directory.appendingPathComponent("metrics.txt")
            try metrics.body.appending("\n").write(to: file, atomically: true, encoding: .utf8)
            let promtool = try await ChildProcess.run("/bin/sh", ["-c", "promtool check metrics < '\(file.path)'"])
            #expect(promtool.status == 0, "promtool: \(promtool.output)\n\(metrics.body)")
            // The label value with quotes, a newline and backslashes, escaped as Prometheus's format says.
            #expect(
                metrics.body.contains(#"local_name="HR \"Strap\"\n\\evil} x=\"1\"""#), "\(metrics.body)")
            #expect(!metrics.body.contains("evil} x=\"1\"\"} "), "unescaped: \(metrics.body)")
            // Values a user checks against what the simulator sent: advertisements counted, the
            // connected devices connected, the adapter's reports.
            for line in [
                "gattway_device_connected{name=\"lamp\",address=\"A4:C1:38:00:00:03\"} 1",
                "# TYPE gattway_advertisements_total counter", "# TYPE gattway_dropped_total counter",
                "gattway_connection_slots ", "gattway_mqtt_backlog_messages ", "gattway_store_forward_queue_messages 0",
                "gattway_web_refused_total{reason=\"unauthorized\"} 12",
            ] {
                #expect(metrics.body.contains(line), "\(line) in\n\(metrics.body)")
            }
            let advertisements = Self.value(metrics.body, "gattway_advertisements_total")
            #expect((advertisements ?? 0) > 10, "\(metrics.body)")
            let adapterReports = Self.value(metrics.body, "gattway_adapter_reports_total{adapter=\"hci0\"}")
            #expect(adapterReports != nil, "\(metrics.body)")
            let seen = try #require(
                Self.value(
                    metrics.body,
                    "gattway_device_last_seen_timestamp_seconds{name=\"lamp\",address=\"A4:C1:38:00:00:03\"}"))
            #expect(abs(seen - Date().timeIntervalSince1970) < 60, "last seen \(seen)")
            // The JSON API; and no secret anywhere.
            let health = try await Self.get(port, "/api/health")
            #expect(health.status == 200)
            let healthJSON = try JSONValue.parse(Array(health.body.utf8))
            #expect(healthJSON["web"]?["refused"]?["unauthorized"] == .number(12), "\(health.body)")
            #expect(healthJSON["web"]?["listening"] == .bool(true), "\(health.body)")
            // Each device with its last readings, as its state message has them.
            var devices = Answer(status: 0, body: "")
            var entries: [JSONValue] = []
            try await AdaptersTests.waitUntil("the Ruuvi's temperature in /api/devices", timeout: 20) {
                devices = try await Self.get(port, "/api/devices")
                guard case .array(let list)? = try? JSONValue.parse(Array(devices.body.utf8)) else { return false }
                entries = list
                return list.contains { $0["name"] == .string("ruuvi") && $0["state"]?["temperature"] != nil }
            }
            #expect(devices.status == 200, "\(devices.body)")
            let lamp = entries.first { $0["name"] == .string("lamp") }
            #expect(lamp?["state"]?["rssi"] == .number(-70), "\(devices.body)")
            #expect(lamp?["last_seen"] != nil && lamp?["last_seen"] != .null, "\(devices.body)")
            for answer in [metrics, health, devices] {
                for secret in [Self.token, proxyKey, bindKey, bindKey.uppercased()] {
                    #expect(!answer.body.contains(secret), "a secret in \(answer.body)")
                }
            }
            // The proxy's clients and the shared connection slots.
            #expect(metrics.body.contains("\ngattway_bluetooth_proxy_clients 0\n"), "\(metrics.body)")
            #expect(metrics.body.contains("\ngattway_connection_slots_free "), "\(metrics.body)")
            // The log names where it listens.
            #expect(e2e.gateway.log().contains("web: listening on http://127.0.0.1:\(port) (auth required)"))
        }
    }

    @Test("a POST without its CSRF token is 403; login by form sets a session cookie; a body over the limit is 413")
    func csrfLoginAndLimits() async throws {
        let port = try LoopbackPort.free()
        try await EndToEnd.run(config: Self.config(port: port, extra: #", "max_body": 1024"#)) { e2e in
            try await Self.waitForListener(port)
            let noCSRF = try await Self.curl(
                ["-X", "POST", "-H", "Authorization: Bearer \(Self.token)", "http://127.0.0.1:\(port)/logout"])
            #expect(noCSRF.status == 403, "\(noCSRF)")
            let session = try await Self.get(port, "/api/session")
            let csrf = try #require(
                {
                    if case .string(let text)? = try JSONValue.parse(Array(session.body.utf8))["csrf"] {
                        text
                    } else {
                        nil
                    }
                }())
            let withCSRF = try await Self.curl(
                [
                    "-X", "POST", "-H", "Authorization: Bearer \(Self.token)", "-H", "X-CSRF-Token: \(csrf)",
                    "http://127.0.0.1:\(port)/logout",
                ])
            #expect(withCSRF.status == 204, "\(withCSRF)")
            // A browser: log in with the token as a form, then use the cookie.
            let jar = e2e.daemon.directory.appendingPathComponent("cookies").path
            let badLogin = try await Self.curl(["-d", "token=wrong-token-0123456789", "http://127.0.0.1:\(port)/login"])
            #expect(badLogin.status == 401)
            let login = try await Self.curl(["-c", jar, "-d", "token=\(Self.token)", "http://127.0.0.1:\(port)/login"])
            #expect(login.status == 200, "\(login)")
            let cookieHealth = try await Self.curl(["-b", jar, "http://127.0.0.1:\(port)/api/health"])
            #expect(cookieHealth.status == 200, "\(cookieHealth)")
            let cookieText = try String(contentsOfFile: jar, encoding: .utf8)
            #expect(cookieText.contains("#HttpOnly_127.0.0.1"), "\(cookieText)")
            // The session's POST needs the session's CSRF token, not the bearer's.
            let sessionCSRF = try #require(
                {
                    if case .string(let text)? = try JSONValue.parse(Array(login.body.utf8))["csrf"] {
                        text
                    } else {
                        nil
                    }
                }())
            let wrongCSRF = try await Self.curl(
                ["-b", jar, "-X", "POST", "-H", "X-CSRF-Token: \(csrf)", "http://127.0.0.1:\(port)/logout"])
            #expect(wrongCSRF.status == 403)
            let formCSRF = try await Self.curl([
                "-b", jar, "-d", "csrf=\(sessionCSRF)", "http://127.0.0.1:\(port)/logout",
            ])
            #expect(formCSRF.status == 204, "\(formCSRF)")
            let afterLogout = try await Self.curl(["-b", jar, "http://127.0.0.1:\(port)/api/health"])
            #expect(afterLogout.status == 401)
            // Over max_body: 413 before the body is read.
            let big = String(repeating: "a", count: 4096)
            let tooLarge = try await Self.curl(
                [
                    "-H", "Authorization: Bearer \(Self.token)", "-H", "X-CSRF-Token: \(csrf)", "-d", "x=\(big)",
                    "http://127.0.0.1:\(port)/logout",
                ])
            #expect(tooLarge.status == 413, "\(tooLarge)")
            let health = try await Self.get(port, "/api/health")
            let json = try JSONValue.parse(Array(health.body.utf8))
            #expect(json["web"]?["refused"]?["csrf"] == .number(2), "\(health.body)")
            #expect(json["web"]?["refused"]?["too_large"] == .number(1), "\(health.body)")
            #expect(json["web"]?["refused"]?["login_failed"] == .number(1), "\(health.body)")
        }
    }

    /// The value of the sample `name` (with its labels) in a scrape.
    static func value(_ text: String, _ name: String) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix(name + " ") {
            return Double(line.dropFirst(name.count + 1))
        }
        return nil
    }
}

extension WebTests {
    @Test("HTTPS with the configured certificate (a self-signed one made by openssl); plain HTTP is not served there")
    func tls() async throws {
        let directory = try TemporaryDirectory.make(prefix: "web-tls")
        defer { try? FileManager.default.removeItem(at: directory) }
        let cert = directory.appendingPathComponent("cert.pem").path
        let key = directory.appendingPathComponent("key.pem").path
        let made = try await ChildProcess.run(
            "/usr/bin/openssl",
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key,
                "-out",
                cert, "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
            ])
        #expect(made.status == 0, "\(made.output)")
        let port = try LoopbackPort.free()
        let config = Self.config(port: port, extra: #", "tls": {"cert_file": "\#(cert)", "key_file": "\#(key)"}"#)
        try await EndToEnd.run(config: config) { e2e in
            try await Self.waitForListener(port)
            let secure = try await Self.curl(
                ["--cacert", cert, "-H", "Authorization: Bearer \(Self.token)", "https://127.0.0.1:\(port)/api/health"])
            #expect(secure.status == 200, "\(secure)")
            let refused = try await Self.curl(["--cacert", cert, "https://127.0.0.1:\(port)/api/health"])
            #expect(refused.status == 401, "\(refused)")
            let plain = try await Self.get(port, "/api/health")
            #expect(plain.status != 200, "plain HTTP on the TLS port: \(plain)")
            #expect(e2e.gateway.log().contains("web: listening on https://127.0.0.1:\(port)"))
        }
    }

    @Test("max_connections: a connection beyond the limit is closed; once one ends the next is served")
    func connectionLimit() async throws {
        let port = try LoopbackPort.free()
        try await EndToEnd.run(config: Self.config(port: port, extra: #", "max_connections": 2"#)) { _ in
            try await Self.waitForListener(port)
            // waitForListener's probe connections are gone before these two take the slots.
            try await Task.sleep(for: .milliseconds(300))
            let first = try TCPClient.connect(port)
            let second = try TCPClient.connect(port)
            // Refused once the loop holds both (its next turns; late on a loaded machine).
            try await AdaptersTests.waitUntil("a third connection refused", timeout: 20) {
                try await Self.get(port, "/api/health", ["--max-time", "2"]).status == 0
            }
            close(first)
            try await AdaptersTests.waitUntil("a request served once a connection ended", timeout: 10) {
                try await Self.get(port, "/api/health").status == 200
            }
            close(second)
            // The connections closed at the limit were counted, in bridge/health and /metrics.
            let health = try await Self.health(port)
            guard case .number(let refused)? = health["web"]?["refused"]?["connection_limit"] else {
                Issue.record("no connection_limit in \(health)")
                return
            }
            #expect(refused >= 1, "\(health)")
            let metrics = try await Self.get(port, "/metrics")
            #expect(
                (Self.value(metrics.body, #"gattway_web_refused_total{reason="connection_limit"}"#) ?? 0) >= 1,
                "\(metrics.body)")
        }
    }

    @Test("/api/events streams readings as they are published; a client that does not read is dropped, memory bounded")
    func eventStream() async throws {
        let port = try LoopbackPort.free()
        try await EndToEnd.run(config: Self.config(port: port, extra: #", "event_buffer": 4096"#)) { e2e in
            try await Self.waitForListener(port)
            // A reading comes within a few seconds of a stream's start; a loaded machine may take
            // longer for the first one, so the stream is opened again (each for 5 s) until one came.
            var stream = try await Self.get(port, "/api/events", ["-N", "--max-time", "5"])
            let reading = "event: reading\ndata: {\"device\":\"ruuvi\",\"payload\":{"
            for _ in 0..<12 where !stream.body.contains(reading) {
                stream = try await Self.get(port, "/api/events", ["-N", "--max-time", "5"])
            }
            #expect(stream.status == 200, "\(stream)")
            #expect(stream.body.contains("event: hello"), "\(stream.body)")
            #expect(stream.body.contains(reading), "\(stream.body)")
            // The streams curl closed are noticed at the next event or keep-alive written to them.
            try await AdaptersTests.waitUntil("the closed streams noticed", timeout: 60) {
                try await Self.health(port)["web"]?["event_clients"] == .number(0)
            }
            let before = try await Self.health(port)
            // A client that asks for the stream and never reads, with a small receive window.
            let slow = try TCPClient.connect(port, receiveBuffer: 1024)
            defer { close(slow) }
            let request = "GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(Self.token)\r\n\r\n"
            TCPClient.send(slow, request)
            try await AdaptersTests.waitUntil("the slow client dropped", timeout: 90) {
                let health = try await Self.health(port)
                return health["web"]?["event_clients_dropped"] == .number(1)
            }
            let after = try await Self.health(port)
            #expect(after["web"]?["event_clients"] == .number(0), "\(after)")
            if case .number(let rssBefore)? = before["process"]?["rss_bytes"],
                case .number(let rssAfter)? = after["process"]?["rss_bytes"]
            {
                #expect(rssAfter - rssBefore < 4_000_000, "RSS grew from \(rssBefore) to \(rssAfter)")
            }
            #expect(e2e.gateway.log().contains("web: an event-stream client read too slowly and was dropped"))
        }
    }

    @Test(
        "the radio view listens once the page asks: before, the scan keeps scan.services and nothing is noted; then the Mystery Tag the filter keeps out shows why"
    )
    func radioViewOnDemand() async throws {
        let port = try LoopbackPort.free()
        // The battery service, as config.json has it: the battery sensor passes the filter; the
        // Garden TH (BTHome) and the Mystery Tag do not.
        let config = Self.config(port: port).replacingOccurrences(
            of: #""bluetooth": {"adapter": "hci0","#,
            with: #""bluetooth": {"adapter": "hci0", "scan": {"services": ["180F"]},"#)
        #expect(config.contains(#""services": ["180F"]"#))
        try await EndToEnd.run(config: config) { e2e in
            try await Self.waitForListener(port)
            // The battery sensor was heard and connected: the scan runs.
            try await AdaptersTests.waitUntil("the battery sensor's reading", timeout: 20) {
                guard
                    case .array(let list)? = try? JSONValue.parse(
                        Array(try await Self.get(port, "/api/devices").body.utf8))
                else { return false }
                return list.contains { $0["name"] == .string("battery_sensor") && $0["state"]?["battery"] != nil }
            }
            let unasked = try await Self.health(port)
            #expect(unasked["raw_radio"]?["listening"] == .bool(false), "\(unasked)")
            #expect(unasked["raw_radio"]?["addresses"] == .number(0), "nothing noted while nobody looks: \(unasked)")
            #expect(!e2e.gateway.log().contains("radio view: scanning without scan.services"))
            // The page asks (as its radio view does every 2 s).
            var entries: [JSONValue] = []
            try await AdaptersTests.waitUntil("the Mystery Tag in the radio view", timeout: 30) {
                let answer = try await Self.get(port, "/api/page/radio")
                guard answer.status == 200, let radio = try? JSONValue.parse(Array(answer.body.utf8)),
                    case .array(let list)? = radio["entries"]
                else { return false }
                entries = list
                return list.contains { $0["address"] == .string("F0:0D:00:00:00:07") }
                    && list.contains { $0["address"] == .string("A4:C1:38:00:00:08") }
            }
            for address in ["F0:0D:00:00:00:07", "A4:C1:38:00:00:08"] {
                let entry = entries.first { $0["address"] == .string(address) }
                #expect(entry?["outcome"] == .string("filtered_by_scan_services"), "\(address): \(entries)")
            }
            // The Garden TH's BTHome frame: what a rule would get from it.
            let garden = entries.first { $0["address"] == .string("A4:C1:38:00:00:08") }
            #expect(garden?["decode"] == .string("decoded") && garden?["parser"] == .string("bthome_v2"), "\(entries)")
            #expect(try await Self.health(port)["raw_radio"]?["listening"] == .bool(true))
            #expect(
                e2e.gateway.log().contains("radio view: scanning without scan.services while the page shows the radio"))
        }
    }

    @Test(
        "libmicrohttpd and GnuTLS are not in the process until the first visit; the port is bound from the start; the visit is served"
    )
    func libraryLoadedAtFirstVisit() async throws {
        let port = try LoopbackPort.free()
        try await EndToEnd.run(config: Self.config(port: port)) { e2e in
            try await AdaptersTests.waitUntil("the web server's log line") {
                e2e.gateway.log().contains("web: listening on http://127.0.0.1:\(port)")
            }
            // Read to the end (procfs reports size 0; a sized read would stop after a page).
            let path = "/proc/\(e2e.gateway.pid)/maps"
            let maps = {
                String(decoding: FileHandle(forReadingAtPath: path)?.readDataToEndOfFile() ?? Data(), as: UTF8.self)
            }
            let before = maps()
            #expect(before.contains("libmosquitto"), "the maps are gattway's")
            #expect(!before.contains("libmicrohttpd"), "libmicrohttpd loaded before anyone came")
            #expect(!before.contains("libgnutls"), "GnuTLS loaded before anyone came")
            // The first client: accepted from the backlog once the library is in, and answered.
            let first = try await Self.get(port, "/api/health")
            #expect(first.status == 200, "\(first)")
            let after = maps()
            #expect(after.contains("libmicrohttpd"))
            #expect(try await Self.get(port, "/api/health", token: nil).status == 401)
        }
    }

    @Test(
        "the event stream gathers a second's messages: a sensor reporting 20 times a second is one event a second, its latest"
    )
    func eventStreamGathers() async throws {
        let port = try LoopbackPort.free()
        let scenario = try EndToEnd.fastDemo { scenario in
            for index in scenario.devices.indices
            where scenario.devices[index].address.description == "C4:D3:8C:12:4A:5F" {
                scenario.devices[index].interval = 0.05
            }
        }
        try await EndToEnd.run(config: Self.config(port: port), scenario: scenario) { e2e in
            try await Self.waitForListener(port)
            try await AdaptersTests.waitUntil("the Ruuvi's state messages", timeout: 20) {
                e2e.messages.messages(on: "gattway/ruuvi").count >= 10
            }
            let before = e2e.messages.messages(on: "gattway/ruuvi").count
            let stream = try await Self.get(port, "/api/events", ["-N", "--max-time", "4"])
            let published = e2e.messages.messages(on: "gattway/ruuvi").count - before
            let events = stream.body.components(separatedBy: "data: {\"device\":\"ruuvi\",").count - 1
            #expect(published >= 20, "the Ruuvi published \(published) state messages in 4 s")
            #expect(events >= 2 && events <= 5, "\(events) events for \(published) messages: \(stream.body)")
            // The event is the latest message: its payload is one the broker got.
            let last = try #require(
                stream.body.components(separatedBy: "\n").last { $0.hasPrefix("data: {\"device\":\"ruuvi\",") })
            let payload = try #require(try JSONValue.parse(Array(last.dropFirst("data: ".count).utf8))["payload"])
            let sent = e2e.messages.messages(on: "gattway/ruuvi").compactMap(\.json)
            #expect(sent.contains(payload), "\(payload)")
        }
    }

    @Test(
        "an event stream stays open past the connection's idle timeout (web.idle_timeout, 5 s here) while events flow: curl ends it at its own limit"
    )
    func eventStreamStaysOpen() async throws {
        let port = try LoopbackPort.free()
        try await EndToEnd.run(config: Self.config(port: port, extra: #", "idle_timeout": "5s""#)) { e2e in
            try await Self.waitForListener(port)
            // An idle connection is closed after the timeout: the server ends a silent one.
            let idle = try TCPClient.connect(port)
            defer { close(idle) }
            let started = Date()
            try await AdaptersTests.waitUntil("the idle connection closed", timeout: 30) {
                TCPClient.isClosed(idle)
            }
            #expect(Date().timeIntervalSince(started) >= 4, "closed before the idle timeout")
            let (status, output) = try await ChildProcess.run(
                "/usr/bin/curl",
                [
                    "-sN", "--max-time", "14", "-H", "Authorization: Bearer \(Self.token)",
                    "http://127.0.0.1:\(port)/api/events",
                ])
            // 28: curl's own --max-time; 18 would be the server ending the stream.
            #expect(status == 28, "curl \(status); \(output.suffix(300))")
            #expect(output.components(separatedBy: "event: reading").count > 10, "\(output.suffix(300))")
        }
    }

    @Test(
        "Prometheus itself (Debian's server) scrapes /metrics with the bearer token: the target is up, gattway's series are queryable"
    )
    func prometheusScrapes() async throws {
        let port = try LoopbackPort.free()
        let prometheusPort = try LoopbackPort.free()
        try await EndToEnd.run(config: Self.config(port: port)) { e2e in
            try await Self.waitForListener(port)
            let directory = e2e.daemon.directory.appendingPathComponent("prometheus")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let tokenFile = directory.appendingPathComponent("token")
            try Self.token.write(to: tokenFile, atomically: true, encoding: .utf8)
            let configFile = directory.appendingPathComponent("prometheus.yml")
            try """
            global: {scrape_interval: 1s, scrape_timeout: 1s}
            scrape_configs:
              - job_name: gattway
                authorization: {credentials_file: \(tokenFile.path)}
                static_configs: [{targets: ["127.0.0.1:\(port)"]}]
            """.write(to: configFile, atomically: true, encoding: .utf8)
            let prometheus = try ChildProcess(
                "/usr/bin/prometheus",
                [
                    "--config.file=\(configFile.path)",
                    "--storage.tsdb.path=\(directory.appendingPathComponent("data").path)",
                    "--web.listen-address=127.0.0.1:\(prometheusPort)",
                ])
            defer { prometheus.stop() }
            func query(_ expression: String) async throws -> [JSONValue] {
                let encoded = expression.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
                let answer = try await Self.curl(["http://127.0.0.1:\(prometheusPort)/api/v1/query?query=\(encoded)"])
                guard case .array(let result)? = try? JSONValue.parse(Array(answer.body.utf8))["data"]?["result"]
                else { return [] }
                return result
            }
            // Scraped, and up: Prometheus parsed the exposition and the token was accepted.
            try await AdaptersTests.waitUntil("Prometheus has scraped gattway", timeout: 60) {
                try await query(#"up{job="gattway"} == 1"#).count == 1
            }
            try await AdaptersTests.waitUntil("gattway's advertisements in Prometheus", timeout: 30) {
                try await query("gattway_advertisements_total > 0").count == 1
            }
            let lamp = try await query(#"gattway_device_rssi_dbm{name="lamp"}"#)
            #expect(lamp.count == 1, "\(lamp)")
            #expect(try await query("scrape_samples_scraped{job=\"gattway\"} > 20").count == 1)
        }
    }

    static func health(_ port: UInt16) async throws -> JSONValue {
        try JSONValue.parse(Array(try await get(port, "/api/health").body.utf8))
    }
}
