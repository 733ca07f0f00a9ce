import BlueZSimulator
import Foundation
import MQTT
import TestSupport
import Testing

/// Commands from MQTT through `gattway run` to the simulated lamp, and the one response each gets.
@Suite("End to end: commands")
struct CommandTests {
    static let lamp = "A4:C1:38:00:00:03"

    /// Sends `payload` to `gattway/lamp/set` and returns the response with `transaction`.
    static func command(_ e2e: EndToEnd, _ payload: String, transaction: String) async throws
        -> MessageRecorder.Received
    {
        let mark = e2e.messages.count
        try await e2e.send("gattway/lamp/set", payload)
        return try await e2e.messages.next(on: "gattway/lamp/response", after: mark) {
            $0.string("transaction") == transaction
        }
    }

    /// The simulator's recorded writes to the lamp's `ff01`.
    static func lampWrites(_ e2e: EndToEnd) async -> [RecordedWrite] {
        await e2e.simulator.recordedWrites.filter {
            $0.device.description == lamp && $0.uuid.shortDescription == "FF01"
        }
    }

    @Test(
        "a write the lamp answers with an application ATT error: the response is error and carries att_error \"0x81\""
    )
    func attErrorInResponse() async throws {
        let scenario = try EndToEnd.fastDemo { scenario in
            for device in scenario.devices.indices where scenario.devices[device].address.description == Self.lamp {
                for service in scenario.devices[device].services.indices {
                    for index in scenario.devices[device].services[service].characteristics.indices
                    where scenario.devices[device].services[service].characteristics[index].uuid.shortDescription
                        == "FF01"
                    {
                        scenario.devices[device].services[service].characteristics[index].writeError = 0x81
                    }
                }
            }
        }
        try await EndToEnd.run(config: DemoWorldConfig.text, scenario: scenario) { e2e in
            try await e2e.messages.next(on: "gattway/lamp/availability") { $0.text == #"{"state":"online"}"# }
            let response = try await Self.command(e2e, #"{"light": "ON", "transaction": "att"}"#, transaction: "att")
            #expect(response.string("status") == "error", "\(response.text)")
            #expect(response.string("att_error") == "0x81", "\(response.text)")
            #expect(response.string("error")?.contains("ATT error: 0x81") == true, "\(response.text)")
            #expect(await Self.lampWrites(e2e).isEmpty, "the refused write is not recorded as done")
        }
    }

    @Test(
        "lamp on: the response is ok with the transaction, the simulator recorded the write, the state shows it; /get reads it back; MQTT 5 response topic honoured (on both advertisement paths: the management path's narrow match rules still bring the lamp's link and values)",
        arguments: ["dbus", "mgmt"]
    )
    func roundTrip(radio: String) async throws {
        let config = DemoWorldConfig.text.replacingOccurrences(
            of: #""adapter": "hci0","#, with: #""adapter": "hci0", "radio": "\#(radio)","#)
        #expect(config.contains(#""radio": "\#(radio)""#))
        try await EndToEnd.run(config: config, managementSocket: radio == "mgmt") { e2e in
            let messages = e2e.messages
            try await messages.next(on: "gattway/lamp/availability") { $0.text == #"{"state":"online"}"# }

            var mark = messages.count
            let response = try await Self.command(e2e, #"{"light": "ON", "transaction": "t1"}"#, transaction: "t1")
            #expect(response.string("status") == "ok", "\(response.text)")
            #expect(response.json?["error"] == .null)
            #expect(response.message.retain == false)
            for stage in ["queued", "connect", "gatt"] {
                if case .number(let milliseconds)? = response.json?["timing_ms"]?[stage] {
                    #expect(milliseconds >= 0 && milliseconds < 5000)
                } else {
                    Issue.record("timing_ms.\(stage) missing in \(response.text)")
                }
            }
            let writes = await Self.lampWrites(e2e)
            #expect(writes.map(\.value) == [[0x01]], "\(writes)")
            #expect(writes.first?.type == "request")
            // ff01 writes are reflected into ff02, which notifies: the lamp's state shows light 1.
            try await messages.next(on: "gattway/lamp", after: mark) { $0.number("light") == 1 }

            // The plain-value form, then /get reads ff02 back and republishes the state.
            mark = messages.count
            try await e2e.send("gattway/lamp/set/light", "OFF")
            let off = try await messages.next(on: "gattway/lamp/response", after: mark)
            #expect(off.string("status") == "ok" && off.json?["transaction"] == .null, "\(off.text)")
            #expect(await Self.lampWrites(e2e).map(\.value) == [[0x01], [0x00]])
            try await messages.next(on: "gattway/lamp", after: mark) { $0.number("light") == 0 }
            mark = messages.count
            // Changed behind the gateway's back:
            try await e2e.simulator.setValue(address: Self.lamp, uuid: "ff02", [0x01])
            try await e2e.send("gattway/lamp/get", #"{"light": "", "transaction": "g1"}"#)
            let get = try await messages.next(on: "gattway/lamp/response", after: mark) {
                $0.string("transaction") == "g1"
            }
            #expect(get.string("status") == "ok", "\(get.text)")
            try await messages.next(on: "gattway/lamp", after: mark) { $0.number("light") == 1 }

            // MQTT 5: the response goes to the request's response topic with its correlation data.
            mark = messages.count
            try await e2e.send(
                "gattway/lamp/set", #"{"brightness": 40}"#, responseTopic: "e2e/replies/lamp", correlation: [7, 8, 9])
            let direct = try await messages.next(on: "e2e/replies/lamp", after: mark)
            #expect(direct.string("status") == "ok", "\(direct.text)")
            #expect(direct.message.properties.correlationData == [7, 8, 9])
            #expect(await Self.lampWrites(e2e).last?.value == [40])
            #expect(
                messages.messages(on: "gattway/lamp/response").count == 3, "no second response on the default topic")
        }
    }

    /// A lamp switched by a retained `/set` would switch again whenever the broker hands the
    /// message out: to the gateway's live subscription, after a broker restart, and at every
    /// start of the gateway. Each time it is answered once with an error and not written.
    @Test(
        "a retained command is refused live, after a broker restart and at a gateway start; the lamp is never written")
    func retainedCommand() async throws {
        try await EndToEnd.run(config: DemoWorldConfig.text, broker: StoreAndForwardTests.persistentBroker) { e2e in
            let messages = e2e.messages
            try await messages.next(on: "gattway/lamp/availability") { $0.text == #"{"state":"online"}"# }
            // Responses through a persistent session (QoS 1, kept by the broker across its
            // restart), so none is missed while this client reconnects after the broker.
            try await StoreAndForwardTests.withSubscriber(e2e, filter: "gattway/lamp/response") { responses in
                let refused: @Sendable (MessageRecorder.Received) -> Bool = {
                    $0.string("status") == "error" && $0.string("error") == "retained command not executed"
                }
                /// The next response to the retained command (transaction r1), which must be a refusal.
                func expectRefusal(after mark: Int, _ when: String) async throws {
                    let response = try await responses.next(on: "gattway/lamp/response", after: mark) {
                        $0.string("transaction") == "r1"
                    }
                    #expect(refused(response), "\(when): \(response.text)")
                }
                var mark = responses.count
                try await e2e.observer.publish(
                    MQTTMessage(
                        topic: "gattway/lamp/set", string: #"{"light": "ON", "transaction": "r1"}"#,
                        retain: true))
                try await expectRefusal(after: mark, "live")

                // The broker restarts (gracefully, keeping its retained messages): the gateway
                // subscribes again and is handed the command again.
                mark = responses.count
                e2e.broker.stop()
                try await e2e.broker.start()
                try await expectRefusal(after: mark, "after the broker restart")

                // A new gateway process finds it at its start.
                e2e.gateway.stop(grace: 5)
                mark = responses.count
                let started = messages.count
                let second = try e2e.startGateway()
                defer { second.stop(grace: 5) }
                try await expectRefusal(after: mark, "at the gateway's start")
                try await messages.next(on: "gattway/lamp/availability", after: started) {
                    $0.text == #"{"state":"online"}"#
                }
                #expect(await Self.lampWrites(e2e).isEmpty, "a retained command reached the lamp")
                #expect(
                    responses.messages(on: "gattway/lamp/response").filter { refused($0) }.count == 3,
                    "one response each time the broker handed it out")

                // Cleared (an empty retained payload, itself refused and counted), a live command works.
                try await e2e.observer.publish(MQTTMessage(topic: "gattway/lamp/set", string: "", retain: true))
                mark = responses.count
                try await e2e.send("gattway/lamp/set", #"{"light": "ON", "transaction": "live"}"#)
                let live = try await responses.next(on: "gattway/lamp/response", after: mark) {
                    $0.string("transaction") == "live"
                }
                #expect(live.string("status") == "ok", "\(live.text)")
                #expect(await Self.lampWrites(e2e).map(\.value) == [[0x01]])
            }
        }
    }

    @Test(
        "unknown device, unknown command, out-of-range value, malformed JSON and oversize payload: one error response each, nothing written"
    )
    func badCommands() async throws {
        try await EndToEnd.run(config: DemoWorldConfig.text) { e2e in
            let messages = e2e.messages
            try await messages.next(on: "gattway/lamp/availability") { $0.text == #"{"state":"online"}"# }
            let padding = String(repeating: "x", count: 300)
            let cases:
                [(
                    name: String, topic: String, payload: String, responseTopic: String, transaction: String?,
                    error: String
                )] = [
                    (
                        "unknown device", "gattway/no_such_lamp/set", #"{"light": "ON", "transaction": "b1"}"#,
                        "gattway/no_such_lamp/response", "b1", "unknown device"
                    ),
                    (
                        "unknown command", "gattway/lamp/set", #"{"fly": 1, "transaction": "b2"}"#,
                        "gattway/lamp/response", "b2", "fly"
                    ),
                    (
                        "u8 out of range", "gattway/lamp/set", #"{"brightness": 256, "transaction": "b3"}"#,
                        "gattway/lamp/response", "b3", "brightness"
                    ),
                    (
                        "above the command's maximum", "gattway/lamp/set", #"{"brightness": 101, "transaction": "b4"}"#,
                        "gattway/lamp/response", "b4", "brightness"
                    ),
                    ("not a bool", "gattway/lamp/set/light", "maybe", "gattway/lamp/response", nil, "light"),
                    (
                        "one bad command spoils the message", "gattway/lamp/set",
                        #"{"light": "ON", "brightness": -1, "transaction": "b5"}"#,
                        "gattway/lamp/response", "b5", "brightness"
                    ),
                    ("malformed JSON", "gattway/lamp/set", #"{"light": "#, "gattway/lamp/response", nil, "JSON"),
                    (
                        "oversize payload", "gattway/lamp/set",
                        #"{"light": "ON", "transaction": "b6", "pad": "\#(padding)"}"#,
                        "gattway/lamp/response", nil, "256"
                    ),
                ]
            for command in cases {
                let mark = messages.count
                try await e2e.send(command.topic, command.payload)
                let response = try await messages.next(on: command.responseTopic, after: mark)
                #expect(response.string("status") == "error", "\(command.name): \(response.text)")
                let error = response.string("error") ?? ""
                #expect(!error.isEmpty && error.contains(command.error), "\(command.name): \(response.text)")
                if let transaction = command.transaction {
                    #expect(response.string("transaction") == transaction, "\(command.name): \(response.text)")
                }
            }
            // A good command after them all: its write is the only one the lamp ever got, and
            // every bad command had exactly one response.
            let mark = messages.count
            try await e2e.send("gattway/lamp/set", #"{"light": "ON", "transaction": "good"}"#)
            let good = try await messages.next(on: "gattway/lamp/response", after: mark) {
                $0.string("transaction") == "good"
            }
            #expect(good.string("status") == "ok", "\(good.text)")
            let writes = await e2e.simulator.recordedWrites
            #expect(writes.map(\.value) == [[0x01]], "\(writes)")
            let lampCases = cases.filter { $0.responseTopic == "gattway/lamp/response" }.count
            #expect(messages.messages(on: "gattway/lamp/response").count == lampCases + 1)
            #expect(messages.messages(on: "gattway/no_such_lamp/response").count == 1)
        }
    }
}
