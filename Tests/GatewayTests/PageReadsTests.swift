import Bluetooth
import Foundation
import Gateway
import JSON
import Testing

@Suite("What the web page reads of the core")
struct PageReadsTests {
    static let config = """
        {"mqtt": {"server": "mqtt://user:pw-s3cret@127.0.0.1:1883"},
         "bluetooth": {"scan": {"services": []}}, "devices": [{"match": {"services": ["FCD2"]}, "connect": false}]}
        """

    @Test("config check: the running summary and the file's, secrets as ***; a broken file's problems")
    func configCheck() async throws {
        let path = NSTemporaryDirectory() + "page-config-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).json"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Self.config.write(toFile: path, atomically: true, encoding: .utf8)
        let harness = try Harness(Self.config)
        let check = await harness.gateway.pageConfigCheck(path: path)
        var text: [UInt8] = []
        check.write(into: &text)
        #expect(!String(decoding: text, as: UTF8.self).contains("pw-s3cret"))
        #expect(
            check["running"]
                == .string(
                    "1 device rule, 0 declarative parsers, 0 commands, base topic gattway, broker mqtt://user:***@127.0.0.1:1883"
                ))
        #expect(check["file"]?["ok"] == .bool(true))
        #expect(check["file"]?["same"] == .bool(true))
        try #"{"devices": [{"match": {"address": "AA:BB"}}], "mqtt": {"server": "mqtt://user:pw-s3cret@h"}}"#
            .write(toFile: path, atomically: true, encoding: .utf8)
        let broken = await harness.gateway.pageConfigCheck(path: path)
        #expect(broken["file"]?["ok"] == .bool(false))
        guard case .array(let problems)? = broken["file"]?["problems"] else {
            Issue.record("no problems: \(broken)")
            return
        }
        #expect(problems.contains { "\($0)".contains("devices[0].match.address") })
    }

    @Test("devices: the last reading with units, RSSI, availability and link state; no radio view without one")
    func devices() async throws {
        let harness = try Harness(Self.config)
        try await harness.start()
        await harness.gateway.handle(bthome(address("A4:C1:38:00:00:01"), rssi: -61))
        await harness.settle()
        guard case .array(let devices) = await harness.gateway.pageDevices, let device = devices.first else {
            Issue.record("no device")
            return
        }
        #expect(device["name"] == .string("A4C138000001"))
        #expect(device["model"] == .string("bthome_v2"))
        #expect(device["rssi"] == .number(-61))
        #expect(device["availability"] == .string("online"))
        #expect(device["link"] == .null)
        #expect(device["parked"] == .bool(false))
        guard case .array(let attributes)? = device["attributes"] else { return }
        #expect(attributes.first?["name"] == .string("temperature"))
        #expect(attributes.first?["unit"] == .string("°C"))
        // The radio's view is off in a gateway made without it.
        #expect(await harness.gateway.pageRadio() == nil)
        #expect(await harness.gateway.pageRule(for: "A4:C1:38:00:00:01") == nil)
        await harness.stop()
    }

    @Test(
        "actions: device/remove and device/bindkey through the bridge request code, answered at once; other verbs refused"
    )
    func actions() async throws {
        let harness = try Harness(Self.config)
        try await harness.start()
        await harness.gateway.handle(bthome(address("A4:C1:38:00:00:01"), rssi: -61))
        await harness.settle()
        let badKey = await harness.gateway.pageRequest(
            verb: "device/bindkey", payload: Array(#"{"device": "A4C138000001", "key": "12"}"#.utf8))
        #expect(badKey?["status"] == .string("error"))
        let key = await harness.gateway.pageRequest(
            verb: "device/bindkey",
            payload: Array(#"{"device": "A4C138000001", "key": "00112233445566778899aabbccddeeff"}"#.utf8))
        #expect(key?["status"] == .string("ok"))
        #expect(!"\(String(describing: key))".contains("00112233"))
        let removed = await harness.gateway.pageRequest(
            verb: "device/remove", payload: Array(#"{"device": "A4C138000001", "transaction": "t1"}"#.utf8))
        #expect(removed?["status"] == .string("ok"))
        #expect(removed?["transaction"] == .string("t1"))
        #expect(await harness.gateway.pageDevices == .array([]))
        // The same response went to MQTT, as for a request there.
        #expect(harness.mqtt.messages(on: "gattway/bridge/response/device/remove").count == 1)
        #expect(await harness.gateway.pageRequest(verb: "gatt/write", payload: Array("{}".utf8)) == nil)
        await harness.stop()
    }

    /// What a page's send got back (the answer closure runs on the loop, one at a time).
    final class Answers: @unchecked Sendable {
        var values: [JSONValue] = []
    }

    @Test(
        "send: a body naming no registered device or an unnamed characteristic is refused before anything is sent; an unknown command is answered at once, as on MQTT, with the page's transaction"
    )
    func send() async throws {
        let harness = try Harness(
            """
            {"mqtt": {"server": "mqtt://127.0.0.1:1883"}, "bluetooth": {"scan": {"services": []}},
             "devices": [{"match": {"address": "A4:C1:38:00:00:01"}, "name": "lamp", "raw_gatt": true,
               "commands": {"light": {"service": "ff00", "characteristic": "ff01", "encoding": "bool"}}}]}
            """)
        try await harness.start()
        await harness.gateway.handle(bthome(address("A4:C1:38:00:00:01"), rssi: -61))
        await harness.settle()
        let answers = Answers()
        func send(_ kind: String, _ body: String) async -> Gateway.PageSendStart {
            await harness.gateway.pageSend(kind, body: Array(body.utf8)) { answers.values.append($0) }
        }
        #expect(await send("command", "[1]") == .refused("expected a JSON object"))
        #expect(await send("reboot", #"{"device": "lamp"}"#) == .refused(#"no such action "reboot""#))
        let nobody = await send("command", #"{"device": "nobody", "command": "light", "value": true}"#)
        #expect(
            nobody
                == .refused("device: expected the name or address of a device config.json names or that is registered"))
        let unnamed = await send("gatt/write", #"{"device": "lamp", "characteristic": "2a00", "value": "00"}"#)
        #expect(
            unnamed
                == .refused(
                    "characteristic 2A00 is not named for lamp by config.json (its subscribe, poll or commands)"))
        // The wrong service for a named characteristic is not it either.
        let wrongService = await send(
            "gatt/read", #"{"device": "lamp", "service": "180f", "characteristic": "ff01"}"#)
        #expect(
            wrongService
                == .refused(
                    "characteristic FF01 is not named for lamp by config.json (its subscribe, poll or commands)"))
        #expect(harness.mqtt.messages(on: "gattway/lamp/response").isEmpty, "nothing was sent")
        // An unknown command: the command runner answers at once, on MQTT and to the page.
        let dance = await send("command", #"{"device": "lamp", "command": "dance", "value": 1}"#)
        guard case .waiting(let token) = dance else {
            Issue.record("not sent: \(dance)")
            return
        }
        #expect(answers.values.count == 1)
        #expect(answers.values.first?["transaction"] == .string("page-\(token)"))
        #expect(answers.values.first?["status"] == .string("error"))
        #expect("\(answers.values)".contains(#"unknown command \"dance\""#))
        #expect(harness.mqtt.messages(on: "gattway/lamp/response").count == 1)
        // Another response on the same topic (an MQTT client's) is not the page's.
        await harness.gateway.handle(
            MQTTInboundMessage(topic: "gattway/lamp/set", payload: Array(#"{"dance": 1, "transaction": 7}"#.utf8)))
        await harness.settle()
        #expect(answers.values.count == 1)
        await harness.stop()
    }
}
