import Bluetooth
import Gateway
import JSON
import Testing

@Suite("Commands: /set, /get, responses, queues")
struct CommandTests {
    static let lamp = address("A4:C1:38:00:00:10")
    static let led = BLECharacteristic(
        service: BluetoothUUID(0xFFF0), uuid: BluetoothUUID(0xFFF1), properties: [.write, .writeWithoutResponse])
    static let mode = BLECharacteristic(
        service: BluetoothUUID(0xFFF0), uuid: BluetoothUUID(0xFFF2), properties: [.write])
    static let battery = BLECharacteristic(
        service: BluetoothUUID(0x180F), uuid: BluetoothUUID(0x2A19), properties: [.read])

    static let config = """
        {"commands": {"max_payload_bytes": 64, "ttl": "30s"},
         "bluetooth": {"gatt_timeout": "5s"},
         "devices": [{"match": {"address": "A4:C1:38:00:00:10"}, "name": "lamp",
                      "commands": {"brightness": {"characteristic": "FFF1", "encoding": "u8", "maximum": 100},
                                   "mode": {"characteristic": "FFF2", "encoding": "u16le", "response": false},
                                   "pattern": {"characteristic": "FFF2", "encoding": "hex"}},
                      "raw_gatt": true}]}
        """

    func harness(hang: Bool = false) async throws -> Harness {
        let harness = try Harness(Self.config)
        harness.ble.add(
            Self.lamp,
            .init(
                characteristics: [Self.led, Self.mode, Self.battery], values: [Self.battery.uuid: [42]],
                hangWrites: hang))
        try await harness.start()
        return harness
    }

    func response(_ messages: [MQTTOutboundMessage]) -> JSONValue? { messages.last.flatMap { json($0.payloadText) } }

    @Test("a command to a disconnected device connects on demand, writes, and answers ok with timings")
    func connectOnDemand() async throws {
        let harness = try await harness()
        #expect(!harness.ble.isConnected(Self.lamp))
        let responses = await harness.command(
            "gattway/lamp/set", #"{"brightness": 80, "transaction": "t1"}"#,
            responseTopic: "gattway/lamp/response")
        #expect(responses.count == 1)
        let reply = response(responses)
        #expect(reply?["transaction"] == .string("t1"))
        #expect(reply?["status"] == .string("ok"))
        #expect(reply?["error"] == .null)
        #expect(
            reply?["timing_ms"]?["queued"] != nil && reply?["timing_ms"]?["connect"] != nil
                && reply?["timing_ms"]?["gatt"] != nil)
        #expect(
            harness.ble.writes == ["write-begin A4:C1:38:00:00:10 FFF1 80", "write-end A4:C1:38:00:00:10 FFF1 request"])
        #expect(harness.ble.connectAttempts == [Self.lamp])
    }

    @Test("/set/<command> takes a plain value; write without response when configured")
    func plainValue() async throws {
        let harness = try await harness()
        let responses = await harness.command("gattway/lamp/set/mode", "513", responseTopic: "gattway/lamp/response")
        #expect(response(responses)?["status"] == .string("ok"))
        #expect(
            harness.ble.writes == [
                "write-begin A4:C1:38:00:00:10 FFF2 1,2", "write-end A4:C1:38:00:00:10 FFF2 command",
            ])
    }

    @Test(
        "each bad command gets exactly one error response and writes nothing",
        arguments: [
            (
                "gattway/nobody/set", #"{"brightness": 1, "transaction": 7}"#, "gattway/nobody/response",
                "unknown device"
            ),
            ("gattway/lamp/set", #"{"volume": 1}"#, "gattway/lamp/response", "unknown command \"volume\""),
            ("gattway/lamp/set/volume", "1", "gattway/lamp/response", "unknown command \"volume\""),
            (
                "gattway/lamp/set", #"{"brightness": 101}"#, "gattway/lamp/response",
                "brightness: 101 is out of range for u8 (expected 0…100)"
            ),
            ("gattway/lamp/set", #"{"brightness": -1}"#, "gattway/lamp/response", "out of range"),
            ("gattway/lamp/set", #"{"mode": 70000}"#, "gattway/lamp/response", "out of range for u16le"),
            ("gattway/lamp/set", #"{"pattern": "0g"}"#, "gattway/lamp/response", "hex expects"),
            (
                "gattway/lamp/set", #"{"brightness": 1, "mode": "x"}"#, "gattway/lamp/response",
                "mode: u16le expects an integer"
            ),
            ("gattway/lamp/set", #"{"brightness": "#, "gattway/lamp/response", "malformed JSON"),
            ("gattway/lamp/set", #"[1]"#, "gattway/lamp/response", "expected a JSON object"),
            (
                "gattway/lamp/set", #"{"pattern": "\#(String(repeating: "00", count: 40))"}"#, "gattway/lamp/response",
                "exceeds the limit of 64"
            ),
            (
                "gattway/lamp/set", #"{"brightness": 5, "timestamp": 1796057900000}"#, "gattway/lamp/response",
                "older than its TTL"
            ),
            ("gattway/lamp/get", #"{"colour": ""}"#, "gattway/lamp/response", "not an attribute"),
        ])
    func badCommands(topic: String, payload: String, responseTopic: String, error: String) async throws {
        let harness = try await harness()
        let responses = await harness.command(topic, payload, responseTopic: responseTopic)
        #expect(responses.count == 1)
        let reply = response(responses)
        let expectedStatus = error.contains("TTL") ? "expired" : "error"
        #expect(reply?["status"] == .string(expectedStatus))
        if case .string(let text)? = reply?["error"] {
            #expect(text.contains(error), "\(text)")
        } else {
            Issue.record("no error text")
        }
        #expect(harness.ble.writes.isEmpty)
        #expect(harness.ble.connectAttempts.isEmpty)
        if topic == "gattway/nobody/set" { #expect(reply?["transaction"] == .number(7)) }
    }

    @Test("writes to one device never interleave, and run in the order the commands arrived")
    func serialWrites() async throws {
        let harness = try await harness()
        for value in 1...5 {
            await harness.gateway.handle(
                MQTTInboundMessage(
                    topic: "gattway/lamp/set", payload: Array(#"{"brightness": \#(value), "mode": \#(value)}"#.utf8)))
        }
        await harness.mqtt.waitFor("gattway/lamp/response", count: 5)
        await harness.gateway.waitUntilIdle()
        let writes = harness.ble.writes
        #expect(writes.count == 20)
        for pair in stride(from: 0, to: writes.count, by: 2) {
            #expect(writes[pair].hasPrefix("write-begin"))
            #expect(writes[pair + 1].hasPrefix("write-end"))
        }
        let values = writes.filter { $0.hasPrefix("write-begin") && $0.contains("FFF1") }.map {
            $0.split(separator: " ").last.map(String.init) ?? ""
        }
        #expect(values == ["1", "2", "3", "4", "5"])
        #expect(harness.ble.connectAttempts.count == 1)
        #expect(harness.mqtt.payloads(on: "gattway/lamp/response").allSatisfy { $0.contains(#""status":"ok""#) })
    }

    @Test("a write that does not complete answers timeout after gatt_timeout on the clock")
    func gattTimeout() async throws {
        let harness = try await harness(hang: true)
        await harness.gateway.handle(
            MQTTInboundMessage(topic: "gattway/lamp/set", payload: Array(#"{"brightness": 1}"#.utf8)))
        // The write is in flight and its deadline armed once the gateway settled.
        await harness.settle()
        #expect(harness.ble.writes.count == 1)
        harness.clock.advance(by: 4.9)
        await harness.settle()
        #expect(harness.mqtt.messages(on: "gattway/lamp/response").isEmpty)
        harness.clock.advance(by: 0.1)
        let responses = await harness.mqtt.waitFor("gattway/lamp/response")
        #expect(response(responses)?["status"] == .string("timeout"))
        #expect(response(responses)?["timing_ms"]?["gatt"] == .number(5000))
    }

    @Test("MQTT 5: the response goes to the response topic with the correlation data")
    func responseTopic() async throws {
        let harness = try await harness()
        let responses = await harness.command(
            "gattway/lamp/set/brightness", "10", responseTopic: "client/replies",
            correlation: [1, 2, 3], mqtt5ResponseTopic: "client/replies")
        #expect(responses.count == 1)
        #expect(responses.first?.correlationData == [1, 2, 3])
        #expect(harness.mqtt.messages(on: "gattway/lamp/response").isEmpty)
    }

    @Test("raw GATT through bridge/request only where raw_gatt is set")
    func rawGATT() async throws {
        let harness = try await harness()
        let read = await harness.command(
            "gattway/bridge/request/gatt/read", #"{"device": "lamp", "characteristic": "2A19", "transaction": "r"}"#,
            responseTopic: "gattway/bridge/response/gatt/read")
        #expect(response(read)?["status"] == .string("ok"))
        #expect(response(read)?["data"]?["value"] == .string("2a"))
        let write = await harness.command(
            "gattway/bridge/request/gatt/write", #"{"device": "lamp", "characteristic": "FFF1", "value": "0102"}"#,
            responseTopic: "gattway/bridge/response/gatt/write")
        #expect(response(write)?["status"] == .string("ok"))
        #expect(harness.ble.writes.first == "write-begin A4:C1:38:00:00:10 FFF1 1,2")
    }

    @Test(
        "each bad bridge request gets exactly one error response, from the feature that owns its verb, and nothing is written",
        arguments: [
            ("device/frobnicate", #"{"device": "lamp"}"#, #"unknown request "device/frobnicate""#),
            ("device/remove", #"[1]"#, "expected a JSON object"),
            (
                "device/remove", #"{"device": "nobody", "transaction": 9}"#,
                "expected the name or address of a known device"
            ),
            ("device/bindkey", #"{"device": "lamp", "key": "00"}"#, "key: expected 32 hex digits"),
            (
                "gatt/write", #"{"device": "lamp", "characteristic": "FFF1"}"#,
                "value: expected the bytes to write as hex"
            ),
            ("gatt/read", #"{"device": "nobody", "characteristic": "2A19"}"#, "device: expected the name or address"),
        ])
    func badBridgeRequests(verb: String, payload: String, error: String) async throws {
        let harness = try await harness()
        let responses = await harness.command(
            "gattway/bridge/request/" + verb, payload, responseTopic: "gattway/bridge/response/" + verb)
        #expect(responses.count == 1)
        let reply = response(responses)
        #expect(reply?["status"] == .string("error"))
        if case .string(let text)? = reply?["error"] {
            #expect(text.contains(error), "\(text)")
        } else {
            Issue.record()
        }
        if payload.contains("transaction") { #expect(reply?["transaction"] == .number(9)) }
        #expect(harness.ble.writes.isEmpty)
        #expect(await harness.gateway.counters.commands == 1)
        #expect(await harness.gateway.counters.commandErrors == 1)
    }

    @Test("an on-demand connection is closed after idle_disconnect on the clock")
    func idleDisconnect() async throws {
        let harness = try await harness()
        await harness.command("gattway/lamp/set/brightness", "10", responseTopic: "gattway/lamp/response")
        #expect(harness.ble.isConnected(Self.lamp))
        await harness.advance(29)
        #expect(harness.ble.isConnected(Self.lamp))
        await harness.advance(1)
        #expect(!harness.ble.isConnected(Self.lamp))
    }

    @Test("an on-demand link the Bluetooth proxy shares stays up until the proxy is done with it")
    func idleDisconnectWaitsForTheProxy() async throws {
        let harness = try await harness()
        await harness.command("gattway/lamp/set/brightness", "10", responseTopic: "gattway/lamp/response")
        #expect(await harness.gateway.reserveConnectionSlot(for: Self.lamp))
        await harness.advance(30)
        #expect(harness.ble.isConnected(Self.lamp))
        await harness.gateway.releaseConnectionSlot(for: Self.lamp)
        await harness.advance(29)
        #expect(harness.ble.isConnected(Self.lamp))
        await harness.advance(1)
        #expect(!harness.ble.isConnected(Self.lamp))
    }
}
