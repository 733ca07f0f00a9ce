import Bluetooth
import Foundation
import Gateway
import JSON
import Testing

/// Device models and command templates (docs/config.md, "Device models", "Command templates"):
/// the bytes each action writes, the config checks, Home Assistant buttons, and the actions
/// through the gateway to a fake device.
@Suite("Named device actions: models and command templates")
struct NamedActionsTests {
    /// 2023-01-07T17:41:33Z.
    static let saturday: Int64 = 1_673_113_293

    static func rule(_ json: String) throws -> DeviceRule {
        let config = try GatewayConfig.parse(Array(#"{"devices": [\#(json)]}"#.utf8))
        return try #require(config.devices.first)
    }

    static func command(_ rule: DeviceRule, _ name: String) throws -> CommandSpec {
        try #require(rule.commands.first { $0.name == name })
    }

    static func bytes(
        _ spec: CommandSpec, _ payload: String, now: Int64 = saturday, offset: Int = 0
    ) throws -> [UInt8] {
        let template = try #require(spec.template)
        return try template.encode(
            try JSONValue.parse(Array(payload.utf8)), time: CommandTime(unixSeconds: now, utcOffsetSeconds: offset))
    }

    static func failure(_ spec: CommandSpec, _ payload: JSONValue, offset: Int = 0) -> String? {
        do {
            _ = try spec.template?.encode(payload, time: CommandTime(unixSeconds: saturday, utcOffsetSeconds: offset))
            return nil
        } catch { return error.message }
    }

    @Test("LYWSD02 set_time: UTC seconds as u32 LE then the offset in hours as a signed byte")
    func lywsd02Bytes() throws {
        let spec = try Self.command(try Self.rule(#"{"model": "LYWSD02"}"#), "set_time")
        #expect(spec.characteristic == BluetoothUUID("EBE0CCB7-7A0A-4B0C-8A1A-6FF2997DA3A6"))
        #expect(spec.service == BluetoothUUID("EBE0CCB0-7A0A-4B0C-8A1A-6FF2997DA3A6"))
        #expect(spec.withResponse == false)
        #expect(try Self.bytes(spec, #"{"timestamp": 1673113293, "tz_offset": 1}"#) == [0xCD, 0xAE, 0xB9, 0x63, 0x01])
        #expect(try Self.bytes(spec, #"{"timestamp": 1673113293, "tz_offset": -3}"#) == [0xCD, 0xAE, 0xB9, 0x63, 0xFD])
        // {}: the gateway's clock and offset (+2 h); a given tz_offset wins over the gateway's.
        #expect(try Self.bytes(spec, "{}", offset: 7200) == [0xCD, 0xAE, 0xB9, 0x63, 0x02])
        #expect(try Self.bytes(spec, #"{"tz_offset": 0}"#, offset: 7200) == [0xCD, 0xAE, 0xB9, 0x63, 0x00])
        #expect(try Self.bytes(spec, #"{"timestamp": 0}"#, offset: -18000) == [0, 0, 0, 0, 0xFB])
        // The aliases take the same write.
        for alias in ["LYWSD02MMC", "MHO-C303"] {
            #expect(try Self.rule(#"{"model": "\#(alias)"}"#).commands == [spec])
        }
    }

    @Test("a gateway offset of whole hours fits the LYWSD02; +05:30 is an error naming tz_offset, not a wrong clock")
    func halfHourOffset() throws {
        let spec = try Self.command(try Self.rule(#"{"model": "LYWSD02"}"#), "set_time")
        let message = Self.failure(spec, .object([]), offset: 19800)
        #expect(message?.contains("whole hours") == true && message?.contains("tz_offset") == true, "\(message ?? "")")
        // PVVX shows local time, so a half-hour offset is fine there.
        let pvvx = try Self.command(try Self.rule(#"{"model": "PVVX"}"#), "set_time")
        #expect(try Self.bytes(pvvx, "{}", now: 0, offset: 19800) == [0x23, 0x58, 0x4D, 0x00, 0x00])
    }

    @Test("PVVX set_time: 0x23 then the local time (UTC plus the offset) as u32 LE, written to 1F1F")
    func pvvxBytes() throws {
        let spec = try Self.command(try Self.rule(#"{"model": "PVVX"}"#), "set_time")
        #expect(spec.characteristic == BluetoothUUID(0x1F1F) && spec.withResponse == false)
        // 17:41:00Z at +1 h: 18:41:00 local is 0x63B9BCBC.
        #expect(
            try Self.bytes(spec, #"{"timestamp": 1673113260, "tz_offset": 1}"#) == [0x23, 0xBC, 0xBC, 0xB9, 0x63])
        #expect(try Self.bytes(spec, "{}", now: 1_673_113_260, offset: 3600) == [0x23, 0xBC, 0xBC, 0xB9, 0x63])
    }

    @Test(
        "the clock is read when the write runs: a set_time held by a slow connect writes the time of the write; a given timestamp stays"
    )
    func clockAtWrite() async throws {
        let harness = try Harness(
            """
            {"bluetooth": {"connect_timeout": "30s"},
             "devices": [{"match": {"address": "A4:C1:38:00:00:20"}, "name": "clock", "model": "LYWSD02"}]}
            """)
        let time = BLECharacteristic(
            service: BluetoothUUID("EBE0CCB0-7A0A-4B0C-8A1A-6FF2997DA3A6")!,
            uuid: BluetoothUUID("EBE0CCB7-7A0A-4B0C-8A1A-6FF2997DA3A6")!, properties: [.writeWithoutResponse])
        let clock = address("A4:C1:38:00:00:20")
        harness.ble.add(clock, .init(characteristics: [time], holdConnect: true))
        try await harness.start()
        for payload in [#"{"set_time": {}}"#, #"{"set_time": {"timestamp": 1673113293, "tz_offset": 1}}"#] {
            await harness.gateway.handle(MQTTInboundMessage(topic: "gattway/clock/set", payload: Array(payload.utf8)))
        }
        await harness.settle()
        #expect(harness.ble.connectAttempts == [clock], "connecting, held by the fake")
        await harness.advance(3)
        harness.ble.update(clock) { $0.holdConnect = false }
        let responses = await harness.mqtt.waitFor("gattway/clock/response", count: 2)
        #expect(responses.count == 2 && responses.allSatisfy { json($0.payloadText)?["status"] == .string("ok") })
        await harness.settle()
        let ebe0ccb7 = "A4:C1:38:00:00:20 ebe0ccb7-7a0a-4b0c-8a1a-6ff2997da3a6"
        // 1796058000 s when the command came, 1796058003 (0x6B0DAB93) when it was written.
        #expect(
            harness.ble.writes.filter { $0.hasPrefix("write-begin") } == [
                "write-begin \(ebe0ccb7) 147,171,13,107,0", "write-begin \(ebe0ccb7) 205,174,185,99,1",
            ])
        let spec = try Self.command(try Self.rule(#"{"model": "LYWSD02"}"#), "set_time")
        let template = try #require(spec.template)
        #expect(template.readsClock(.object([])) && template.readsClock(.object([("timestamp", .null)])))
        #expect(!template.readsClock(.object([("timestamp", .number(1))])))
        let bot = try Self.command(try Self.rule(#"{"model": "SwitchBot Bot"}"#), "press")
        #expect(bot.template?.readsClock(.object([])) == false)
        // "" (as /get takes it) and null stand for {}.
        #expect(try Self.bytes(bot, #""""#) == [0x57, 0x01, 0x00] && Self.failure(bot, .null) == nil)
    }

    @Test("SwitchBot Bot press/on/off and Curtain open/close/stop/position write their fixed bytes to CBA20002")
    func switchBotBytes() throws {
        let bot = try Self.rule(#"{"model": "SwitchBot Bot"}"#)
        #expect(bot.commands.map(\.name) == ["press", "on", "off"])
        #expect(try Self.bytes(Self.command(bot, "press"), "{}") == [0x57, 0x01, 0x00])
        #expect(try Self.bytes(Self.command(bot, "on"), "{}") == [0x57, 0x01, 0x01])
        #expect(try Self.bytes(Self.command(bot, "off"), "{}") == [0x57, 0x01, 0x02])
        #expect(
            bot.commands.allSatisfy {
                $0.characteristic == BluetoothUUID("CBA20002-224D-11E6-9FB8-0002A5D5C51B")
                    && $0.service == BluetoothUUID("CBA20D00-224D-11E6-9FB8-0002A5D5C51B") && $0.withResponse
            })
        let curtain = try Self.rule(#"{"model": "SwitchBot Curtain"}"#)
        #expect(try Self.bytes(Self.command(curtain, "open"), "{}") == [0x57, 0x0F, 0x45, 0x01, 0x05, 0xFF, 0x00])
        #expect(try Self.bytes(Self.command(curtain, "close"), "{}") == [0x57, 0x0F, 0x45, 0x01, 0x05, 0xFF, 0x64])
        #expect(try Self.bytes(Self.command(curtain, "stop"), "{}") == [0x57, 0x0F, 0x45, 0x01, 0x00, 0xFF])
        let position = try Self.command(curtain, "position")
        #expect(try Self.bytes(position, #"{"position": 30}"#) == [0x57, 0x0F, 0x45, 0x01, 0x05, 0xFF, 30])
        #expect(Self.failure(position, .object([]))?.contains("position is required") == true)
        #expect(Self.failure(position, .object([("position", .number(101))]))?.contains("out of range") == true)
        #expect(position.press == nil, "a command that needs a value is no button")
    }

    @Test(
        "bad payloads are errors naming what was expected, never a write",
        arguments: [
            (JSONValue.string("now"), "expected a JSON object"),
            (.array([]), "expected a JSON object"),
            (.number(5), "expected a JSON object"),
            (.object([("when", .number(1))]), "\"when\" is not a field"),
            (.object([("timestamp", .number(-1))]), "timestamp: expected whole seconds"),
            (.object([("timestamp", .number(1.5))]), "timestamp: expected whole seconds"),
            (.object([("timestamp", .number(1e300))]), "timestamp: expected whole seconds"),
            (.object([("timestamp", .number(5e9))]), "out of range for u32le"),
            (.object([("timestamp", .string("1673113293"))]), "timestamp: expected whole seconds"),
            (.object([("tz_offset", .number(20))]), "tz_offset: expected hours"),
            (.object([("tz_offset", .number(1.1))]), "tz_offset: expected hours"),
            (.object([("tz_offset", .bool(true))]), "tz_offset: expected hours"),
            (.object([("tz_offset", .number(5.5))]), "whole hours"),
        ])
    func badPayloads(payload: JSONValue, expected: String) throws {
        let spec = try Self.command(try Self.rule(#"{"model": "LYWSD02"}"#), "set_time")
        let message = Self.failure(spec, payload)
        #expect(message?.contains(expected) == true, "\(message ?? "accepted")")
    }

    @Test("a commands block written out by hand is the same command as the model's: users add clocks without Swift")
    func handWritten() throws {
        let model = try Self.rule(#"{"model": "LYWSD02"}"#)
        let written = try Self.rule(
            #"""
            {"commands": {"set_time": {
              "service": "EBE0CCB0-7A0A-4B0C-8A1A-6FF2997DA3A6",
              "characteristic": "EBE0CCB7-7A0A-4B0C-8A1A-6FF2997DA3A6", "response": false,
              "template": [{"value": "timestamp", "type": "u32le"}, {"value": "tz_offset", "type": "s8"}]}}}
            """#)
        #expect(written.commands == model.commands)
        // The model's commands come first; the rule's own follow.
        let both = try Self.rule(
            #"{"model": "SwitchBot Bot", "commands": {"hold": {"characteristic": "CBA20002-224D-11E6-9FB8-0002A5D5C51B", "encoding": "hex"}}}"#
        )
        #expect(both.commands.map(\.name) == ["press", "on", "off", "hold"])
        #expect(DeviceModels.problems.isEmpty, "\(DeviceModels.problems)")
    }

    @Test("docs/config.md shows the built-in table as it is")
    func documented() throws {
        let text = try String(
            contentsOf: ConfigTests.repoRoot.appendingPathComponent("docs/config.md"), encoding: .utf8)
        let section = try #require(text.range(of: "### Device models"))
        let start = try #require(text.range(of: "```json\n", range: section.upperBound..<text.endIndex))
        let end = try #require(text.range(of: "\n```", range: start.upperBound..<text.endIndex))
        let documented = try JSONValue.parse(Array(text[start.upperBound..<end.lowerBound].utf8))
        #expect(documented == (try JSONValue.parse(Array(DeviceModels.json.utf8))))
    }

    @Test(
        "config problems name the key",
        arguments: [
            (#"{"model": "LYWSD03"}"#, "devices[0].model", "not a known model"),
            (
                #"{"model": "LYWSD02", "commands": {"set_time": {"characteristic": "FFF1", "encoding": "u8"}}}"#,
                "devices[0].commands.set_time", "already has a command set_time"
            ),
            (
                #"{"commands": {"x": {"characteristic": "FFF1", "encoding": "hex", "template": [{"hex": "01"}]}}}"#,
                "devices[0].commands.x.encoding", "either encoding or template"
            ),
            (
                #"{"commands": {"x": {"characteristic": "FFF1", "template": []}}}"#, "devices[0].commands.x.template",
                "non-empty"
            ),
            (
                #"{"commands": {"x": {"characteristic": "FFF1", "template": [{"hex": "zz"}]}}}"#,
                "devices[0].commands.x.template[0].hex", "hex byte pairs"
            ),
            (
                #"{"commands": {"x": {"characteristic": "FFF1", "template": [{"value": "n"}]}}}"#,
                "devices[0].commands.x.template[0].type", "is required"
            ),
            (
                #"{"commands": {"x": {"characteristic": "FFF1", "template": [{"value": "n", "type": "hex"}]}}}"#,
                "devices[0].commands.x.template[0].type", "not a numeric type"
            ),
            (
                #"{"commands": {"x": {"characteristic": "FFF1", "template": [{"hex": "01", "value": "n", "type": "u8"}]}}}"#,
                "devices[0].commands.x.template[0]", "not both"
            ),
            (
                #"{"commands": {"x": {"characteristic": "FFF1", "template": [{"value": "timestamp", "type": "u32le", "default": 3}]}}}"#,
                "devices[0].commands.x.template[0].default", "gateway's clock"
            ),
            (
                #"{"commands": {"x": {"characteristic": "FFF1", "maximum": 3, "template": [{"hex": "01"}]}}}"#,
                "devices[0].commands.x", "no options, minimum or maximum"
            ),
            (
                #"{"commands": {"x": {"characteristic": "FFF1", "template": [{"hex": "01", "unit": "s"}]}}}"#,
                "devices[0].commands.x.template[0].unit", "not a known key"
            ),
        ])
    func refused(rule: String, path: String, message: String) {
        do {
            _ = try GatewayConfig.parse(Array(#"{"devices": [\#(rule)]}"#.utf8))
            Issue.record("accepted \(rule)")
        } catch {
            let problem = error.problems.first { $0.path == path }
            #expect(problem?.message.contains(message) == true, "\(error.problems)")
        }
    }

    @Test("Home Assistant: every action that needs no value is a button pressing {}; position gets no entity")
    func discoveryButtons() async throws {
        let harness = try Harness(
            """
            {"homeassistant": {"enabled": true},
             "devices": [{"match": {"address": "A4:C1:38:00:00:20"}, "name": "clock", "model": "LYWSD02"},
                         {"match": {"address": "A4:C1:38:00:00:21"}, "name": "curtain", "model": "SwitchBot Curtain"}]}
            """)
        try await harness.start()
        for raw in ["A4:C1:38:00:00:20", "A4:C1:38:00:00:21"] {
            await harness.gateway.handle(
                BLEDiscovery(address: address(raw), advertisement: AdvertisementData(rssi: -50)))
        }
        await harness.settle()
        var byTopic: [String: JSONValue] = [:]
        for message in harness.mqtt.published where message.topic.hasSuffix("/config") {
            byTopic[message.topic] = json(message.payloadText)
        }
        let setTime = try #require(byTopic["homeassistant/button/gattway_A4C138000020/set_time/config"])
        #expect(setTime["command_topic"] == .string("gattway/clock/set/set_time"))
        #expect(setTime["payload_press"] == .string("{}"))
        #expect(setTime["name"] == .string("Set time"))
        for action in ["open", "close", "stop"] {
            let button = try #require(byTopic["homeassistant/button/gattway_A4C138000021/\(action)/config"])
            #expect(button["command_topic"] == .string("gattway/curtain/set/\(action)"))
            #expect(button["payload_press"] == .string("{}"))
        }
        #expect(!byTopic.keys.contains { $0.hasSuffix("/position/config") })
    }

    @Test(
        "through the gateway: /set/set_time with {} writes the gateway's clock and offset, a given timestamp and tz_offset win, a bad payload answers error and writes nothing"
    )
    func throughTheGateway() async throws {
        let harness = try Harness(
            """
            {"devices": [{"match": {"address": "A4:C1:38:00:00:20"}, "name": "clock", "model": "LYWSD02"}]}
            """)
        let time = BLECharacteristic(
            service: BluetoothUUID("EBE0CCB0-7A0A-4B0C-8A1A-6FF2997DA3A6")!,
            uuid: BluetoothUUID("EBE0CCB7-7A0A-4B0C-8A1A-6FF2997DA3A6")!,
            properties: [.write, .writeWithoutResponse])
        let clock = address("A4:C1:38:00:00:20")
        harness.ble.add(clock, .init(characteristics: [time]))
        harness.clock.setUTCOffset(seconds: -7200)
        try await harness.start()
        // The harness's wall clock: 1796058000 s = 0x6B0DAB90.
        var reply = await harness.command("gattway/clock/set/set_time", "{}", responseTopic: "gattway/clock/response")
        #expect(reply.last.flatMap { json($0.payloadText) }?["status"] == .string("ok"), "\(reply)")
        reply = await harness.command(
            "gattway/clock/set", #"{"set_time": {"timestamp": 1673113293, "tz_offset": 1}, "transaction": "t"}"#,
            responseTopic: "gattway/clock/response")
        #expect(reply.last.flatMap { json($0.payloadText) }?["transaction"] == .string("t"))
        reply = await harness.command(
            "gattway/clock/set/set_time", #"{"tz_offset": "UTC"}"#, responseTopic: "gattway/clock/response")
        let error = reply.last.flatMap { json($0.payloadText) }
        #expect(error?["status"] == .string("error"))
        #expect(
            error?["error"]
                == .string("set_time: tz_offset: expected hours east of UTC, -12 to 14 in quarter hours, got \"UTC\""))
        let ebe0ccb7 = "A4:C1:38:00:00:20 ebe0ccb7-7a0a-4b0c-8a1a-6ff2997da3a6"
        #expect(
            harness.ble.writes == [
                "write-begin \(ebe0ccb7) 144,171,13,107,254", "write-end \(ebe0ccb7) command",
                "write-begin \(ebe0ccb7) 205,174,185,99,1", "write-end \(ebe0ccb7) command",
            ])
    }
}
