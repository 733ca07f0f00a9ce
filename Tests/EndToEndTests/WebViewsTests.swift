import BlueZSimulator
import ESPHomeAPI
import Foundation
import GatewayFakes
import Glibc
import JSON
import Subprocess
import TestSupport
import Testing

/// The page's device actions, fleet and proxy views (docs/web-page.md) through `gattway run`'s web
/// server against the demo world, with curl as the page uses it: a command and a GATT write sent
/// from a device's page land on the simulated lamp byte for byte and answer with the response the
/// MQTT side publishes; a characteristic config.json does not name is refused; no CSRF token, 403.
@Suite("End to end: the page's actions, fleet and proxy views")
struct WebViewsTests {
    /// The demo world's config with the web server, the lamp allowed raw GATT, and (optionally)
    /// the Bluetooth proxy on `proxyPort` with an encryption key.
    static func config(port: UInt16, proxyPort: UInt16?, proxyKey: String) -> String {
        var text = WebTests.config(port: port).replacingOccurrences(
            of: #""name": "lamp", "connect": true,"#, with: #""name": "lamp", "connect": true, "raw_gatt": true,"#)
        if let proxyPort {
            text = text.replacingOccurrences(
                of: #""commands": {"max_payload_bytes": 256},"#,
                with: #"""
                    "commands": {"max_payload_bytes": 256},
                    "bluetooth_proxy": {"enabled": true, "listen": "127.0.0.1:\#(proxyPort)", "encryption_key": "\#(proxyKey)"},
                    """#)
        }
        return text
    }

    static func post(_ port: UInt16, _ path: String, _ body: String, csrf: String?) async throws -> WebTests.Answer {
        try await WebTests.curl(
            ["-X", "POST", "--max-time", "60", "-H", "Authorization: Bearer \(WebTests.token)"]
                + (csrf.map { ["-H", "X-CSRF-Token: \($0)"] } ?? [])
                + ["-H", "Content-Type: application/json", "-d", body, "http://127.0.0.1:\(port)\(path)"])
    }

    static func csrf(_ port: UInt16) async throws -> String {
        let session = try JSONValue.parse(Array(try await WebTests.get(port, "/api/session").body.utf8))
        guard case .string(let csrf)? = session["csrf"] else { throw CancellationError() }
        return csrf
    }

    @Test(
        "a command and a GATT write from the lamp's page land on the simulated ff01 byte for byte, answered as on MQTT; an unnamed characteristic is refused; no CSRF, 403"
    )
    func sendFromThePage() async throws {
        let port = try LoopbackPort.free()
        let proxyPort = try LoopbackPort.free()
        let proxyKey = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
        let config = Self.config(port: port, proxyPort: proxyPort, proxyKey: proxyKey)
        try await EndToEnd.run(config: config, scenario: WebTests.scenario()) { e2e in
            try await WebTests.waitForListener(port)
            let csrf = try await Self.csrf(port)
            // What the lamp's page offers: its two commands, reading its state, GATT on ff01/ff02.
            let actions = try JSONValue.parse(
                Array(try await WebTests.get(port, "/api/page/actions?device=lamp").body.utf8))
            #expect(actions["raw_gatt"] == .bool(true), "\(actions)")
            #expect(actions["commands"]?[index: 1]?["name"] == .string("brightness"), "\(actions)")
            #expect(actions["commands"]?[index: 1]?["maximum"] == .number(100), "\(actions)")
            #expect(actions["attributes"] == .array([.string("lamp_state")]), "\(actions)")
            #expect(actions["characteristics"]?[index: 1]?["characteristic"] == .string("FF01"), "\(actions)")
            #expect(try await WebTests.get(port, "/api/page/actions?device=nobody").status == 404)

            // Without the CSRF token: 403, nothing written.
            let forged = try await Self.post(
                port, "/api/page/send/command", #"{"device":"lamp","command":"brightness","value":42}"#, csrf: nil)
            #expect(forged.status == 403, "\(forged)")

            // A command: the answer is the response gattway/lamp/response carries, after the write.
            let command = try await Self.post(
                port, "/api/page/send/command", #"{"device":"lamp","command":"brightness","value":42}"#, csrf: csrf)
            #expect(command.status == 200, "\(command)")
            let answer = try JSONValue.parse(Array(command.body.utf8))
            #expect(answer["status"] == .string("ok"), "\(command.body)")
            guard case .string(let transaction)? = answer["transaction"] else {
                Issue.record("no transaction in \(command.body)")
                return
            }
            #expect(transaction.hasPrefix("page-"))
            try await e2e.messages.next(on: "gattway/lamp/response") {
                $0.text.contains("\"transaction\":\"\(transaction)\"") && $0.text.contains("\"status\":\"ok\"")
            }
            #expect(await CommandTests.lampWrites(e2e).map(\.value) == [[42]])

            // A command the rule refuses (over maximum): its error, as on MQTT, and no write.
            let over = try await Self.post(
                port, "/api/page/send/command", #"{"device":"lamp","command":"brightness","value":500}"#, csrf: csrf)
            #expect(over.status == 200, "\(over)")
            #expect(try JSONValue.parse(Array(over.body.utf8))["status"] == .string("error"), "\(over.body)")

            // A GATT write of ff01, which config.json names (the commands' characteristic).
            let write = try await Self.post(
                port, "/api/page/send/gatt/write",
                #"{"device":"lamp","service":"ff00","characteristic":"ff01","value":"2a07ff"}"#, csrf: csrf)
            #expect(write.status == 200, "\(write)")
            #expect(try JSONValue.parse(Array(write.body.utf8))["status"] == .string("ok"), "\(write.body)")
            #expect(await CommandTests.lampWrites(e2e).map(\.value) == [[42], [0x2a, 0x07, 0xff]])

            // A GATT read of ff02: the answer carries the bytes.
            let read = try await Self.post(
                port, "/api/page/send/gatt/read", #"{"device":"lamp","characteristic":"ff02"}"#, csrf: csrf)
            #expect(read.status == 200, "\(read)")
            #expect(try JSONValue.parse(Array(read.body.utf8))["data"] != nil, "\(read.body)")

            // Reading the lamp's state from its page (the `/get` of MQTT): answered ok with the
            // transaction gattway/lamp/response carries; the value read from ff02 is published as
            // the lamp's state (which the page shows from its event stream), as after a `/get`.
            let beforeRead = e2e.messages.count
            let state = try await Self.post(
                port, "/api/page/send/read", #"{"device":"lamp","attribute":"lamp_state"}"#, csrf: csrf)
            #expect(state.status == 200, "\(state)")
            let stateAnswer = try JSONValue.parse(Array(state.body.utf8))
            #expect(stateAnswer["status"] == .string("ok"), "\(state.body)")
            try await e2e.messages.next(on: "gattway/lamp", after: beforeRead) { $0.text.contains("\"light\":") }
            if case .string(let readTransaction)? = stateAnswer["transaction"] {
                try await e2e.messages.next(on: "gattway/lamp/response") {
                    $0.text.contains("\"transaction\":\"\(readTransaction)\"")
                }
            } else {
                Issue.record("no transaction in \(state.body)")
            }
            let noAttribute = try await Self.post(port, "/api/page/send/read", #"{"device":"lamp"}"#, csrf: csrf)
            #expect(noAttribute.status == 400 && noAttribute.body.contains("attribute"), "\(noAttribute)")

            // A characteristic config.json does not name for the lamp (the device has 2A00, say):
            // refused before anything is sent, even though raw_gatt would let MQTT reach it.
            let unnamed = try await Self.post(
                port, "/api/page/send/gatt/write", #"{"device":"lamp","characteristic":"2a00","value":"00"}"#,
                csrf: csrf)
            #expect(unnamed.status == 400, "\(unnamed)")
            #expect(unnamed.body.contains("is not named for lamp by config.json"), "\(unnamed.body)")
            #expect(await CommandTests.lampWrites(e2e).count == 2)

            // The log names each action from the page.
            #expect(e2e.gateway.log().contains("web: command sent from the page (bearer): \(transaction)"))

            // Not in a fleet: 404. The proxy: its scanner, its slots, no client yet, no key.
            #expect(try await WebTests.get(port, "/api/page/fleet").status == 404)
            let proxy = try await WebTests.get(port, "/api/page/proxy")
            #expect(proxy.status == 200, "\(proxy)")
            let view = try JSONValue.parse(Array(proxy.body.utf8))
            #expect(view["listen"] == .string("127.0.0.1:\(proxyPort)"), "\(proxy.body)")
            #expect(view["encrypted"] == .bool(true), "\(proxy.body)")
            #expect(view["clients"] == .array([]), "\(proxy.body)")
            #expect(view["scanner"]?["mode"] != nil, "\(proxy.body)")
            #expect(view["slots"]?["total"] != nil, "\(proxy.body)")
            #expect(!proxy.body.contains(proxyKey), "the proxy's key in \(proxy.body)")
        }
    }

    @Test(
        "without the proxy and the fleet their views are 404; a device not registered is refused, an unknown command answered as on MQTT"
    )
    func viewsOffAndRefusals() async throws {
        let port = try LoopbackPort.free()
        let config = Self.config(port: port, proxyPort: nil, proxyKey: "")
        try await EndToEnd.run(config: config, scenario: WebTests.scenario()) { _ in
            try await WebTests.waitForListener(port)
            #expect(try await WebTests.get(port, "/api/page/proxy").status == 404)
            #expect(try await WebTests.get(port, "/api/page/fleet").status == 404)
            let csrf = try await Self.csrf(port)
            let unknown = try await Self.post(
                port, "/api/page/send/command", #"{"device":"nobody","command":"x","value":1}"#, csrf: csrf)
            #expect(unknown.status == 400, "\(unknown)")
            let noCommand = try await Self.post(
                port, "/api/page/send/command", #"{"device":"lamp","command":"dance","value":1}"#, csrf: csrf)
            #expect(noCommand.status == 200, "\(noCommand)")
            #expect(noCommand.body.contains(#"unknown command \"dance\""#), "\(noCommand.body)")
        }
    }
}

extension WebViewsTests {
    /// A fleet gateway's config with the web server (open: loopback) on `port`, or without it.
    static func fleetConfig(_ id: String, broker: String, port: UInt16?) -> String {
        FleetTests.config(id, broker: broker).replacingOccurrences(
            of: #""health": {"enabled": false},"#,
            with: #""health": {"enabled": false}, "web": "#
                + (port.map { #"{"listen": "127.0.0.1:\#($0)"},"# } ?? #"{"enabled": false},"#))
    }

    /// `/api/page/fleet` of the gateway on `port` (open: no token).
    static func fleetView(_ port: UInt16) async throws -> JSONValue? {
        let answer = try await WebTests.get(port, "/api/page/fleet", token: nil)
        guard answer.status == 200 else { return nil }
        return try JSONValue.parse(Array(answer.body.utf8))
    }

    @Test(
        "the fleet view: who owns the sensor, its RSSI at each gateway; when it moves, the handover with its time and reason"
    )
    func fleetView() async throws {
        let port = try LoopbackPort.free()
        try await FleetTests.World.run(levels: [-60, -80]) { id, broker in
            Self.fleetConfig(id, broker: broker, port: id == "gw-a" ? port : nil)
        } _: { world in
            try await WebTests.waitForListener(port)
            // gw-a (-60 dBm) owns the sensor; gw-b hears it at -80.
            var view: JSONValue?
            try await AdaptersTests.waitUntil("gw-a owns the sensor and hears gw-b's RSSI", timeout: 40) {
                view = try await Self.fleetView(port)
                guard let device = view?["devices"]?[index: 0], device["owner"] == .string("gw-a") else { return false }
                return device["gateways"]?[index: 1]?["gateway"] == .string("gw-b")
            }
            let device = try #require(view?["devices"]?[index: 0])
            #expect(view?["gateway_id"] == .string("gw-a"))
            #expect(device["name"] == .string("bthome_th"), "\(device)")
            #expect(device["role"] == .string("owner"), "\(device)")
            if case .number(let own)? = device["gateways"]?[index: 0]?["rssi"],
                case .number(let other)? = device["gateways"]?[index: 1]?["rssi"]
            {
                #expect(abs(own + 60) <= 3 && abs(other + 80) <= 3, "\(device)\n\(world.logs())")
            } else {
                Issue.record("RSSI per gateway missing: \(device)")
            }
            #expect(view?["peers"]?[index: 0]?["gateway"] == .string("gw-b"), "\(String(describing: view))")
            // The sensor moves next to gw-b: gw-a's view shows gw-b as the owner and the handover.
            let moved = Date()
            try await world.radios[0].simulator.setRSSI(address: FleetTests.sensor, -90)
            try await AdaptersTests.waitUntil("gw-b owns the sensor in gw-a's view", timeout: 30) {
                view = try await Self.fleetView(port)
                return view?["devices"]?[index: 0]?["owner"] == .string("gw-b")
                    && view?["handovers"]?[index: 0]?["gained"] == .bool(false)
            }
            let handover = try #require(view?["handovers"]?[index: 0])
            #expect(handover["name"] == .string("bthome_th"), "\(handover)")
            #expect(handover["reason"] == .string("a gateway that hears it better claimed it"), "\(handover)")
            if case .number(let at)? = handover["at"] {
                #expect(abs(at / 1000 - moved.timeIntervalSince1970) < 30, "\(handover)")
            } else {
                Issue.record("no time: \(handover)")
            }
            #expect(view?["devices"]?[index: 0]?["role"] == .string("none"), "\(String(describing: view))")
            // An action for it from gw-a's page is refused there: the owner's page sends it.
            let csrf = try await Self.csrf(port)
            let refused = try await Self.post(
                port, "/api/page/send/read", #"{"device":"bthome_th","attribute":"temperature"}"#, csrf: csrf)
            #expect(refused.status == 400, "\(refused)")
            #expect(
                refused.body.contains("another gateway of the fleet owns bthome_th: send from its page"),
                "\(refused.body)")
        }
    }
}

extension WebViewsTests {
    /// The local address of a client's socket, as the proxy names its peer (`127.0.0.1:port`).
    static func localAddress(_ fd: Int32) -> String {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return "127.0.0.1:\(UInt16(bigEndian: address.sin_port))"
    }

    @Test(
        "the proxy view: each API client with its hello and subscriptions, the slot a client's connection holds, the scanner's mode"
    )
    func proxyView() async throws {
        let port = try LoopbackPort.free()
        let proxyPort = try LoopbackPort.free()
        let config = """
            {
              "mqtt": {"server": "$SERVER", "base_topic": "gattway", "client_id": "gattway-e2e"},
              "web": {"listen": "127.0.0.1:\(port)"},
              "bluetooth_proxy": {"enabled": true, "plaintext": true, "listen": "127.0.0.1:\(proxyPort)"}
            }
            """
        try await EndToEnd.run(config: config, scenario: try ProxyBulkTests.scenario()) { e2e in
            try await WebTests.waitForListener(port)
            try await AdaptersTests.waitUntil("the proxy's listener") { LoopbackPort.accepts(proxyPort) }
            // One client watches advertisements; the other connects the Bulk device.
            let (watcher, client) = try await ProxyBulkTests.watcherAndConnectedClient(e2e, port: proxyPort)
            var watcherOpen = true
            defer {
                if watcherOpen { watcher.close() }
                client.close()
            }
            let (watcherPeer, clientPeer) = (Self.localAddress(watcher.fd), Self.localAddress(client.fd))
            var view = JSONValue.null
            try await AdaptersTests.waitUntil("both clients and the connection in the proxy view") {
                let answer = try await WebTests.get(port, "/api/page/proxy", token: nil)
                view = try JSONValue.parse(Array(answer.body.utf8))
                guard case .array(let clients)? = view["clients"], clients.count == 2,
                    case .array(let connections)? = view["slots"]?["connections"], connections.count == 1
                else { return false }
                return clients.allSatisfy { $0["info"] == .string("tests") }
            }
            let clients = view["clients"]
            #expect(clients?[index: 0]?["peer"] == .string(watcherPeer), "\(view)")
            #expect(clients?[index: 0]?["advertisements"] == .bool(true), "\(view)")
            #expect(clients?[index: 0]?["api_version"] == .string("1.10"), "\(view)")
            #expect(clients?[index: 1]?["peer"] == .string(clientPeer), "\(view)")
            #expect(clients?[index: 1]?["advertisements"] == .bool(false), "\(view)")
            let connection = view["slots"]?["connections"]?[index: 0]
            #expect(connection?["address"] == .string("C0:FF:EE:00:00:01"), "\(view)")
            #expect(connection?["client"] == .string(clientPeer), "\(view)")
            #expect(connection?["connected"] == .bool(true), "\(view)")
            #expect(view["encrypted"] == .bool(false), "\(view)")
            if case .number(let free)? = view["slots"]?["free"], case .number(let total)? = view["slots"]?["total"] {
                #expect(total - free == 1, "one slot held: \(view)")
            } else {
                Issue.record("no slots: \(view)")
            }
            #expect(view["scanner"]?["mode"] == .string("active"), "\(view)")
            // A client gone is gone from the view.
            watcher.close()
            watcherOpen = false
            try await AdaptersTests.waitUntil("the watcher gone from the view") {
                let answer = try await WebTests.get(port, "/api/page/proxy", token: nil)
                guard case .array(let clients)? = try JSONValue.parse(Array(answer.body.utf8))["clients"] else {
                    return false
                }
                return clients.count == 1
            }
        }
    }
}

extension JSONValue {
    /// The element at `index` of an array (nil for another value or out of range).
    fileprivate subscript(index index: Int) -> JSONValue? {
        guard case .array(let items) = self, items.indices.contains(index) else { return nil }
        return items[index]
    }
}
