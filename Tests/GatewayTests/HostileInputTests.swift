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

    @Test("a timestamp past Int64's milliseconds is refused with an error, nothing is written and the next command runs",
          arguments: ["1e19", "1e300", "9223372036854775807", "-1", "\"noon\""])
    func timestampOutOfRange(_ timestamp: String) async throws {
        let harness = try await harness()
        let responses = await harness.command("gattway/lamp/set", #"{"brightness": 1, "timestamp": \#(timestamp)}"#,
                                              responseTopic: "gattway/lamp/response")
        let reply = responses.last.flatMap { json($0.payloadText) }
        #expect(reply?["status"] == .string("error"))
        if case .string(let text)? = reply?["error"] { #expect(text.hasPrefix("timestamp: expected the send time")) }
        #expect(harness.ble.writes.isEmpty)
        let next = await harness.command("gattway/lamp/set", #"{"brightness": 2}"#, responseTopic: "gattway/lamp/response")
        #expect(next.last.flatMap { json($0.payloadText) }?["status"] == .string("ok"))
    }

    @Test("a retained command is answered once with an error and counted; nothing is written, on any command topic",
          arguments: [
              ("gattway/lamp/set", #"{"brightness": 80, "transaction": "r1"}"#, "gattway/lamp/response"),
              ("gattway/lamp/set/brightness", "80", "gattway/lamp/response"),
              ("gattway/lamp/get", #"{"battery": ""}"#, "gattway/lamp/response"),
              ("gattway/bridge/request/gatt/write", #"{"device": "lamp", "characteristic": "FFF1", "value": "50"}"#,
               "gattway/bridge/response/gatt/write"),
              ("gattway/bridge/request/device/remove", #"{"device": "lamp"}"#, "gattway/bridge/response/device/remove"),
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
        let live = await harness.command("gattway/lamp/set", #"{"brightness": 80}"#, responseTopic: "gattway/lamp/response")
        #expect(live.last.flatMap { json($0.payloadText) }?["status"] == .string("ok"))
    }
}

/// Polls `condition` every millisecond for up to five seconds.
func waitUntil(_ condition: () -> Bool) async throws {
    for _ in 0..<5000 where !condition() { try await Task.sleep(for: .milliseconds(1)) }
    #expect(condition())
}
