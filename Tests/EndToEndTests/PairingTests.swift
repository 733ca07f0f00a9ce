import BlueZSimulator
import ESPHomeAPI
import Foundation
import GatewayFakes
import JSON
import Subprocess
import TestSupport
import Testing

/// Pairing beyond Just Works through `gattway run` and MQTT (docs/config.md, "Pairing"): the
/// simulator's `Device1.Pair` asks gattway's agent as bluetoothd does, the question comes out on
/// `bridge/event` and is answered on `bridge/request/device/pair/confirm`.
@Suite("End to end: pairing with a passkey or a numeric comparison")
struct PairingE2ETests {
    static let lock = "A4:C1:38:00:00:0A"
    static let panel = "A4:C1:38:00:00:0B"
    static let stranger = "A4:C1:38:00:00:0C"

    static func scenario() throws -> Scenario {
        let device = { (address: String, pairing: String, passkey: Int) in
            #"""
            {"address": "\#(address)", "rssi": -50, "interval": "100ms", "service_uuids": ["180F"],
             "pairing": "\#(pairing)", "passkey": \#(passkey),
             "gatt": [{"uuid": "180F", "characteristics": [
               {"uuid": "2A19", "flags": ["read", "notify"], "value": {"hex": "50"}, "notify": {"every": "500ms"}}]}]}
            """#
        }
        return try Scenario.parse(
            Data(
                """
                {"seed": 1, "adapters": [{"name": "hci0", "address": "00:AA:01:00:00:00"}],
                 "devices": [\(device(lock, "passkey_entry", 654321)), \(device(panel, "numeric_comparison", 4711)),
                             \(device(stranger, "passkey_entry", 1))]}
                """.utf8))
    }

    static func config(proxyPort: UInt16? = nil) -> String {
        let proxy =
            proxyPort.map {
                #", "bluetooth_proxy": {"enabled": true, "plaintext": true, "listen": "127.0.0.1:\#($0)"}"#
            }
            ?? ""
        return """
            {"mqtt": {"server": "$SERVER", "base_topic": "gattway"}, "homeassistant": {"enabled": false},
             "bluetooth": {"pairing_timeout": "3s"},
             "devices": [{"match": {"address": "\(lock)"}, "name": "lock", "connect": true},
                         {"match": {"address": "\(panel)"}, "name": "panel", "connect": true},
                         {"match": {"services": ["180F"]}, "connect": true}]\(proxy)}
            """
    }

    /// Sends a bridge request about `device` (with `fields`, e.g. `"passkey": 654321`) and returns
    /// its response.
    static func request(
        _ e2e: EndToEnd, _ verb: String, device: String, _ fields: String = "", transaction: String
    ) async throws -> MessageRecorder.Received {
        let mark = e2e.messages.count
        let extra = fields.isEmpty ? "" : ", \(fields)"
        try await e2e.send(
            "gattway/bridge/request/\(verb)", #"{"device": "\#(device)"\#(extra), "transaction": "\#(transaction)"}"#)
        return try await e2e.messages.next(on: "gattway/bridge/response/\(verb)", after: mark, timeout: 30) {
            $0.string("transaction") == transaction
        }
    }

    /// Waits for the device's link (the simulator pairs connected devices only).
    static func connected(_ e2e: EndToEnd, _ name: String) async throws {
        _ = try await e2e.messages.next(on: "gattway/bridge/event", timeout: 30) {
            $0.string("type") == "device_connected" && $0.text.contains(#""name":"\#(name)""#)
        }
    }

    /// Runs `trigger` (a pair request, a proxy client's pair) and returns the `pairing_request`
    /// it brings out.
    static func asked(_ e2e: EndToEnd, by trigger: () async throws -> Void) async throws -> MessageRecorder.Received {
        let mark = e2e.messages.count
        try await trigger()
        return try await e2e.messages.next(on: "gattway/bridge/event", after: mark, timeout: 20) {
            $0.string("type") == "pairing_request"
        }
    }

    /// Starts a pair request and returns the question it brings out.
    static func question(_ e2e: EndToEnd, pair device: String, _ transaction: String) async throws
        -> MessageRecorder.Received
    {
        try await asked(e2e) {
            try await e2e.send(
                "gattway/bridge/request/device/pair", #"{"device": "\#(device)", "transaction": "\#(transaction)"}"#)
        }
    }

    static func pairResponse(_ e2e: EndToEnd, _ transaction: String, after mark: Int = 0) async throws
        -> MessageRecorder.Received
    {
        try await e2e.messages.next(on: "gattway/bridge/response/device/pair", after: mark, timeout: 30) {
            $0.string("transaction") == transaction
        }
    }

    @Test(
        "passkey entry: a wrong passkey fails, the right one pairs and bonds, pair again is ok, unpair removes the bond"
    )
    func passkeyEntry() async throws {
        try await EndToEnd.run(config: Self.config(), scenario: try Self.scenario()) { e2e in
            try await Self.connected(e2e, "lock")
            let asked = try await Self.question(e2e, pair: "lock", "p1")
            #expect(asked.json?["data"]?["method"] == .string("passkey_entry"), "\(asked.text)")
            #expect(asked.json?["data"]?["address"] == .string(Self.lock), "\(asked.text)")
            // An answer of the wrong kind is refused and the question keeps waiting.
            let wrongKind = try await Self.request(
                e2e, "device/pair/confirm", device: "lock", #""accept": true"#, transaction: "w")
            #expect(wrongKind.string("status") == "error", "\(wrongKind.text)")
            let outOfRange = try await Self.request(
                e2e, "device/pair/confirm", device: "lock", #""passkey": 1000000"#, transaction: "r")
            #expect(outOfRange.string("status") == "error", "\(outOfRange.text)")
            let wrong = try await Self.request(
                e2e, "device/pair/confirm", device: "lock", #""passkey": 111111"#, transaction: "c1")
            #expect(wrong.string("status") == "ok", "\(wrong.text)")
            let failed = try await Self.pairResponse(e2e, "p1")
            #expect(failed.string("status") == "error", "\(failed.text)")
            #expect(failed.text.contains("AuthenticationFailed"), "\(failed.text)")
            #expect(try await AdaptersTests.deviceProperty(e2e, "hci0", Self.lock, "Paired")?.bool == false)

            let again = try await Self.question(e2e, pair: Self.lock, "p2")
            #expect(again.json?["data"]?["name"] == .string("lock"), "\(again.text)")
            let right = try await Self.request(
                e2e, "device/pair/confirm", device: Self.lock, #""passkey": 654321"#, transaction: "c2")
            #expect(right.string("status") == "ok", "\(right.text)")
            let paired = try await Self.pairResponse(e2e, "p2")
            #expect(paired.string("status") == "ok", "\(paired.text)")
            #expect(paired.json?["data"]?["paired"] == .bool(true), "\(paired.text)")
            #expect(try await AdaptersTests.deviceProperty(e2e, "hci0", Self.lock, "Paired")?.bool == true)
            #expect(try await AdaptersTests.deviceProperty(e2e, "hci0", Self.lock, "Bonded")?.bool == true)
            // Paired already: no question, ok at once.
            let twice = try await Self.request(e2e, "device/pair", device: "lock", transaction: "p3")
            #expect(twice.string("status") == "ok", "\(twice.text)")

            let unpaired = try await Self.request(e2e, "device/unpair", device: "lock", transaction: "u1")
            #expect(unpaired.string("status") == "ok", "\(unpaired.text)")
            #expect(unpaired.json?["data"]?["paired"] == .bool(false), "\(unpaired.text)")
            #expect(try await AdaptersTests.deviceProperty(e2e, "hci0", Self.lock, "Paired")?.bool != true)
        }
    }

    @Test("numeric comparison: the number is on bridge/event; rejected fails, accepted pairs")
    func numericComparison() async throws {
        try await EndToEnd.run(config: Self.config(), scenario: try Self.scenario()) { e2e in
            try await Self.connected(e2e, "panel")
            let asked = try await Self.question(e2e, pair: "panel", "n1")
            #expect(asked.json?["data"]?["method"] == .string("numeric_comparison"), "\(asked.text)")
            #expect(asked.json?["data"]?["passkey"] == .number(4711), "\(asked.text)")
            let passkey = try await Self.request(
                e2e, "device/pair/confirm", device: "panel", #""passkey": 4711"#, transaction: "k")
            #expect(passkey.string("status") == "error", "a comparison is accepted or not: \(passkey.text)")
            let no = try await Self.request(
                e2e, "device/pair/confirm", device: "panel", #""accept": false"#, transaction: "c1")
            #expect(no.string("status") == "ok", "\(no.text)")
            #expect(try await Self.pairResponse(e2e, "n1").string("status") == "error")

            _ = try await Self.question(e2e, pair: "panel", "n2")
            let yes = try await Self.request(
                e2e, "device/pair/confirm", device: "panel", #""accept": true"#, transaction: "c2")
            #expect(yes.string("status") == "ok", "\(yes.text)")
            #expect(try await Self.pairResponse(e2e, "n2").string("status") == "ok")
            #expect(try await AdaptersTests.deviceProperty(e2e, "hci0", Self.panel, "Paired")?.bool == true)
        }
    }

    @Test(
        "no answer: pairing_timeout after pairing_timeout and the pair fails; unnamed devices and answers without a question are refused"
    )
    func refusals() async throws {
        try await EndToEnd.run(config: Self.config(), scenario: try Self.scenario()) { e2e in
            let none = try await Self.request(
                e2e, "device/pair/confirm", device: "lock", #""passkey": 654321"#, transaction: "q")
            #expect(none.string("status") == "error", "\(none.text)")
            #expect(none.text.contains("no pairing question"), "\(none.text)")
            let stranger = try await Self.request(e2e, "device/pair", device: Self.stranger, transaction: "s")
            #expect(stranger.string("status") == "error", "\(stranger.text)")
            let nobody = try await Self.request(e2e, "device/pair", device: "nobody", transaction: "x")
            #expect(nobody.string("status") == "error", "\(nobody.text)")
            let strangerUnpair = try await Self.request(e2e, "device/unpair", device: Self.stranger, transaction: "su")
            #expect(strangerUnpair.string("status") == "error", "\(strangerUnpair.text)")

            try await Self.connected(e2e, "lock")
            let start = ContinuousClock.now
            _ = try await Self.question(e2e, pair: "lock", "t1")
            let timedOut = try await e2e.messages.next(on: "gattway/bridge/event", timeout: 20) {
                $0.string("type") == "pairing_timeout"
            }
            #expect(timedOut.json?["data"]?["name"] == .string("lock"), "\(timedOut.text)")
            let failed = try await Self.pairResponse(e2e, "t1")
            #expect(failed.string("status") == "error", "\(failed.text)")
            #expect(ContinuousClock.now - start >= .seconds(2.5))
            let late = try await Self.request(
                e2e, "device/pair/confirm", device: "lock", #""passkey": 654321"#, transaction: "l")
            #expect(late.string("status") == "error", "\(late.text)")
            #expect(e2e.gateway.log().contains("not answered"), "\(e2e.gateway.log())")
            #expect(try await AdaptersTests.deviceProperty(e2e, "hci0", Self.lock, "Paired")?.bool == false)
        }
    }

    /// BluetoothDeviceRequest (address, type) as Home Assistant sends it.
    static func deviceRequest(_ address: UInt64, _ type: UInt64) -> [UInt8] {
        var request = ProtobufWriter()
        request.varint(1, address)
        request.uint32(2, UInt32(type))
        request.bool(3, true)  // has_address_type: public (0)
        return request.bytes
    }

    /// The next message of `type` the proxy sends, as (field → varint).
    static func next(_ client: inout ESPHomeTestClient, _ type: UInt16) throws -> [UInt32: UInt64]? {
        let deadline = ContinuousClock.now + .seconds(40)
        while ContinuousClock.now < deadline {
            guard let message = client.receive() else { return nil }
            guard message.type == type else { continue }
            var fields: [UInt32: UInt64] = [:]
            var reader = ProtobufReader(message.payload)
            while let (field, value) = try reader.next() { fields[field] = try value.varint(field: field) }
            return fields
        }
        return nil
    }

    @Test("a proxy client's pair asks on MQTT: answered there it pairs; unanswered it fails with 0x89")
    func proxyClient() async throws {
        let port = try LoopbackPort.free()
        // Not named by a rule: the proxy may pair any device, and its question still goes to MQTT.
        try await EndToEnd.run(config: Self.config(proxyPort: port), scenario: try Self.scenario()) { e2e in
            try await AdaptersTests.waitUntil("the proxy's listener") { LoopbackPort.accepts(port) }
            try await AdaptersTests.waitUntil("bluetoothd knows the device") {
                try await AdaptersTests.known(e2e, "hci0", Self.stranger)
            }
            var client = try ESPHomeTestClient(port: port)
            defer { client.close() }
            client.send(type: MessageType.helloRequest, ESPHomeTestClient.hello())
            #expect(client.receive()?.type == MessageType.helloResponse)
            let address: UInt64 = 0xA4C1_3800_000C
            var connected = false
            for _ in 0..<5 where !connected {
                client.send(type: MessageType.bluetoothDeviceRequest, Self.deviceRequest(address, 5))
                connected = try Self.next(&client, MessageType.bluetoothDeviceConnectionResponse)?[2] == 1
                if !connected { try await Task.sleep(for: .milliseconds(300)) }
            }
            #expect(connected, "\(e2e.gateway.log())")

            // Unanswered: ESP_GATT_AUTH_FAIL after pairing_timeout, and a log line saying why.
            let asked = try await Self.asked(e2e) {
                client.send(type: MessageType.bluetoothDeviceRequest, Self.deviceRequest(address, 2))
            }
            #expect(asked.json?["data"]?["address"] == .string(Self.stranger), "\(asked.text)")
            let refused = try Self.next(&client, MessageType.bluetoothDevicePairingResponse)
            #expect(refused?[2] ?? 0 == 0, "paired: \(String(describing: refused))")
            #expect(refused?[3] == 0x89, "\(String(describing: refused))")
            #expect(e2e.gateway.log().contains("Bluetooth proxy: pairing of \(Self.stranger) failed"))

            // Answered on MQTT: paired.
            _ = try await Self.asked(e2e) {
                client.send(type: MessageType.bluetoothDeviceRequest, Self.deviceRequest(address, 2))
            }
            let answer = try await Self.request(
                e2e, "device/pair/confirm", device: Self.stranger, #""passkey": 1"#, transaction: "a")
            #expect(answer.string("status") == "ok", "\(answer.text)")
            let paired = try Self.next(&client, MessageType.bluetoothDevicePairingResponse)
            #expect(paired?[2] == 1, "\(String(describing: paired)) \(e2e.gateway.log())")
            #expect(try await AdaptersTests.deviceProperty(e2e, "hci0", Self.stranger, "Paired")?.bool == true)
        }
    }
}
