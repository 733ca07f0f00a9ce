import Bluetooth
import Gateway
import JSON
import Testing

/// What an MQTT client allowed to publish can send, and what the gateway does with it: a clear
/// error response and no write, the process running on.
@Suite("Hostile input: commands that must not actuate or trap")
struct HostileInputTests {
    static let lamp = CommandTests.lamp
    static let led = CommandTests.led

    func harness(_ config: String = CommandTests.config) async throws -> Harness {
        let harness = try Harness(config)
        harness.ble.add(Self.lamp, .init(characteristics: [CommandTests.led, CommandTests.mode, CommandTests.battery]))
        try await harness.start()
        return harness
    }

    @Test(
        "a timestamp past Int64's milliseconds is refused with an error, nothing is written and the next command runs",
        arguments: ["1e19", "1e300", "9223372036854775807", "-1", "\"noon\""])
    func timestampOutOfRange(_ timestamp: String) async throws {
        let harness = try await harness()
        let responses = await harness.command(
            "gattway/lamp/set", #"{"brightness": 1, "timestamp": \#(timestamp)}"#,
            responseTopic: "gattway/lamp/response")
        let reply = responses.last.flatMap { json($0.payloadText) }
        #expect(reply?["status"] == .string("error"))
        if case .string(let text)? = reply?["error"] { #expect(text.hasPrefix("timestamp: expected the send time")) }
        #expect(harness.ble.writes.isEmpty)
        let next = await harness.command(
            "gattway/lamp/set", #"{"brightness": 2}"#, responseTopic: "gattway/lamp/response")
        #expect(next.last.flatMap { json($0.payloadText) }?["status"] == .string("ok"))
    }

    @Test(
        "a retained command is answered once with an error and counted; nothing is written, on any command topic",
        arguments: [
            ("gattway/lamp/set", #"{"brightness": 80, "transaction": "r1"}"#, "gattway/lamp/response"),
            ("gattway/lamp/set/brightness", "80", "gattway/lamp/response"),
            ("gattway/lamp/get", #"{"battery": ""}"#, "gattway/lamp/response"),
            (
                "gattway/bridge/request/gatt/write", #"{"device": "lamp", "characteristic": "FFF1", "value": "50"}"#,
                "gattway/bridge/response/gatt/write"
            ),
            ("gattway/bridge/request/device/remove", #"{"device": "lamp"}"#, "gattway/bridge/response/device/remove"),
            (
                "gattway/bridge/request/device/bindkey",
                #"{"device": "lamp", "key": "231d39c1d7cc1ab1aee224cd096db932"}"#,
                "gattway/bridge/response/device/bindkey"
            ),
        ])
    func retainedCommand(topic: String, payload: String, responseTopic: String) async throws {
        let harness = try await harness()
        await harness.gateway.handle(MQTTInboundMessage(topic: topic, payload: Array(payload.utf8), retain: true))
        let responses = await harness.mqtt.waitFor(responseTopic)
        await harness.gateway.waitUntilIdle()
        #expect(responses.count == 1)
        let reply = responses.last.flatMap { json($0.payloadText) }
        #expect(reply?["status"] == .string("error"))
        #expect(reply?["error"] == .string("retained command not executed"))
        if payload.contains("r1") { #expect(reply?["transaction"] == .string("r1")) }
        #expect(harness.ble.log.isEmpty, "no connect, read or write: \(harness.ble.log)")
        #expect(await harness.gateway.counters.dropped.retainedCommand == 1)
        // The same command without the flag runs (the lamp stays known after a refused removal).
        let live = await harness.command(
            "gattway/lamp/set", #"{"brightness": 80}"#, responseTopic: "gattway/lamp/response")
        #expect(live.last.flatMap { json($0.payloadText) }?["status"] == .string("ok"))
    }

    @Test(
        "an MQTT 5 response topic the gateway must not publish on (its own state and bridge topics, discovery, wildcards) is replaced by the default",
        arguments: [
            "gattway/lamp", "gattway/bridge/state", "homeassistant/switch/gattway_lamp/config", "homeassistant",
            "a/+/b", "$SYS/x", "",
        ])
    func refusedResponseTopic(_ topic: String) async throws {
        let harness = try await harness(
            CommandTests.config.replacingOccurrences(
                of: #"{"commands""#, with: #"{"homeassistant": {"enabled": true}, "commands""#))
        let responses = await harness.command(
            "gattway/lamp/set", #"{"brightness": 3}"#, responseTopic: "gattway/lamp/response",
            mqtt5ResponseTopic: topic)
        #expect(responses.last.flatMap { json($0.payloadText) }?["status"] == .string("ok"))
        #expect(
            !harness.mqtt.messages(on: topic).contains { json($0.payloadText)?["status"] != nil },
            "no response on \(topic)")
        #expect(await harness.gateway.counters.dropped.responseTopic == 1)
    }

    @Test("a response topic of the requester's own is used")
    func ownResponseTopic() async throws {
        let harness = try await harness()
        let responses = await harness.command(
            "gattway/lamp/set", #"{"brightness": 3}"#, responseTopic: "replies/phone-1",
            mqtt5ResponseTopic: "replies/phone-1")
        #expect(responses.last.flatMap { json($0.payloadText) }?["status"] == .string("ok"))
        #expect(harness.mqtt.messages(on: "gattway/lamp/response").isEmpty)
        #expect(await harness.gateway.counters.dropped.responseTopic == 0)
    }

    /// Advertisement-only sensors registered before the lamp sit at lower positions of the
    /// registry; forgetting them while the lamp's command waits for its connection moves the
    /// lamp. The write must still go to the lamp, and only to it.
    @Test("devices forgotten while a command waits for its connection: the write lands on the commanded device")
    func evictionDuringConnect() async throws {
        let config = CommandTests.config.replacingOccurrences(
            of: #""devices": ["#,
            with:
                #""bluetooth": {"gatt_timeout": "5s", "forget_after": "10s"}, "devices": [{"match": {"services": ["FCD2"]}},"#
        )
        .replacingOccurrences(of: #""bluetooth": {"gatt_timeout": "5s"},"#, with: "")
        let harness = try Harness(config)
        harness.ble.add(Self.lamp, .init(characteristics: [CommandTests.led, CommandTests.mode], holdConnect: true))
        try await harness.start()
        let sensors = (1...4).map { address("C0:00:00:00:00:0\($0)") }
        for sensor in sensors { await harness.gateway.handle(bthome(sensor)) }
        await harness.gateway.handle(
            MQTTInboundMessage(topic: "gattway/lamp/set", payload: Array(#"{"brightness": 7}"#.utf8)))
        await harness.settle()
        #expect(harness.ble.connectAttempts == [Self.lamp], "the lamp is connecting (held by the fake)")
        // The sensors fall silent and are forgotten while the lamp is connecting.
        await harness.advance(11)
        #expect(await harness.gateway.counters.devicesRemoved == 4)
        harness.ble.update(Self.lamp) { $0.holdConnect = false }
        let responses = await harness.mqtt.waitFor("gattway/lamp/response")
        await harness.gateway.waitUntilIdle()
        #expect(responses.last.flatMap { json($0.payloadText) }?["status"] == .string("ok"))
        #expect(
            harness.ble.writes == ["write-begin A4:C1:38:00:00:10 FFF1 7", "write-end A4:C1:38:00:00:10 FFF1 request"])
    }

    @Test("devices forgotten between the writes of one command: every write lands on the commanded device")
    func evictionBetweenWrites() async throws {
        let config = #"""
            {"bluetooth": {"forget_after": "10s"},
             "devices": [{"match": {"services": ["FCD2"]}},
                         {"match": {"address": "A4:C1:38:00:00:10"}, "name": "lamp",
                          "commands": {"brightness": {"characteristic": "FFF1", "encoding": "u8"},
                                       "mode": {"characteristic": "FFF2", "encoding": "u8"}}}]}
            """#
        let harness = try Harness(config)
        harness.ble.add(Self.lamp, .init(characteristics: [CommandTests.led, CommandTests.mode]))
        try await harness.start()
        for sensor in (1...3).map({ address("C0:00:00:00:00:0\($0)") }) { await harness.gateway.handle(bthome(sensor)) }
        // Connected first, so the command's writes start at once.
        _ = await harness.command("gattway/lamp/set", #"{"brightness": 1}"#, responseTopic: "gattway/lamp/response")
        await harness.gateway.handle(
            MQTTInboundMessage(topic: "gattway/lamp/set", payload: Array(#"{"brightness": 2, "mode": 3}"#.utf8)))
        // The first write takes a few scheduling turns: forget the sensors meanwhile.
        await harness.advance(11)
        _ = await harness.mqtt.waitFor("gattway/lamp/response", count: 2)
        await harness.gateway.waitUntilIdle()
        #expect(
            harness.mqtt.payloads(on: "gattway/lamp/response").compactMap { json($0)?["status"] } == [
                .string("ok"), .string("ok"),
            ])
        #expect(harness.ble.writes.allSatisfy { $0.contains("A4:C1:38:00:00:10") }, "\(harness.ble.writes)")
        #expect(harness.ble.writes.filter { $0.hasPrefix("write-end") }.count == 3)
    }

    /// Two `from_topic` messages for one characteristic: the first one's `setValue` is slow (a
    /// D-Bus round trip), the second one's finishes first. What centrals read must end as the
    /// newest value, the one the gateway reports serving.
    @Test("a slow port call does not leave an older value served than the newest message")
    func peripheralValueOrder() async throws {
        let harness = try Harness(PeripheralTests.thermometer)
        try await harness.start()
        let topic = "home/humidity"
        harness.peripheral.holdNextSetValue()
        let gateway = harness.gateway
        await harness.source(topic, "40")
        #expect(harness.peripheral.isHoldingSetValue, "the first value's setValue waits in the port")
        await harness.source(topic, "55.5")
        harness.peripheral.releaseSetValue()
        await harness.settle()
        #expect(await gateway.servedValue(PeripheralTests.humidity) == [0xAE, 0x15])
        #expect(
            harness.peripheral.value(PeripheralTests.humidity) == [0xAE, 0x15], "the port ends with the newest value")
    }
}

@Suite("Hostile input: advertisements that must not flood the journal")
struct ParseWarningTests {
    @Test(
        "garbage from 200 rotating addresses: every payload counted, at most 20 warnings at once, then the held-back count"
    )
    func rotatingGarbage() async throws {
        let capture = LogCapture()
        let harness = try Harness(#"{"devices": [{"match": {"services": ["FCD2"]}}]}"#, logger: capture.logger)
        try await harness.start()
        // BTHome service data with a version byte that is not v2: a parse error for every frame.
        for device in 0..<200 {
            let address = BluetoothAddress(rawValue: 0xC0_00_00_00_00_00 + UInt64(device))
            await harness.gateway.handle(bthome(address, payload: [0xE0]))
        }
        #expect(await harness.gateway.counters.parseErrors == 200)
        var warnings = capture.all.filter { $0.contains("not decoded") }
        #expect(warnings.count == 20, "\(warnings.count) warnings")
        // Three seconds later one more line may go out, and it says how many were held back.
        await harness.advance(3)
        await harness.gateway.handle(bthome(BluetoothAddress(rawValue: 0xC1_00_00_00_00_00), payload: [0xE0]))
        warnings = capture.all.filter { $0.contains("not decoded") }
        #expect(warnings.count == 21)
        #expect(
            warnings.last?.contains("and 180 more payloads not decoded and not logged") == true,
            "\(warnings.last ?? "")")
    }
}
