import EventLoop
import Foundation
import Gateway
import GatewayRuntime
import MQTT
import Synchronization
import TestSupport
import Testing

/// The gateway's MQTT port over a real client and a real mosquitto, as the core uses it.
@Suite("ClientMQTTPort against a real mosquitto")
struct ClientMQTTPortTests {
    /// A started client for `broker` and the port over it; `observe` is registered before the start.
    static func port(
        _ broker: MosquittoBroker, loop: EventLoop, version: MQTTProtocolVersion = .v5,
        observe: (ClientMQTTPort) -> Void = { _ in }
    ) async throws -> ClientMQTTPort {
        var configuration = try MQTTConfiguration(url: broker.url, clientID: "runtime-\(UUID().uuidString.prefix(8))")
        configuration.protocolVersion = version
        let client = try MQTTClient(configuration: configuration, loop: loop)
        let port = ClientMQTTPort(client: client)
        observe(port)
        try await client.start()
        return port
    }

    /// A second client that records what it receives on `filter`.
    static func subscriber(_ broker: MosquittoBroker, loop: EventLoop, filter: String) async throws -> (
        MQTTClient, Recorded<MQTTMessage>
    ) {
        let client = try MQTTClient(
            configuration: try MQTTConfiguration(url: broker.url, clientID: "observer-\(UUID().uuidString.prefix(8))"),
            loop: loop)
        try await client.connect()
        let recorded = Recorded<MQTTMessage>()
        let subscription = try await client.subscribe(to: MQTTTopicFilter(filter))
        Task { for await message in subscription { recorded.append(message) } }
        return (client, recorded)
    }

    @Test(
        "publish: the broker delivers topic, payload, QoS and retain, and with MQTT 5 the correlation data and when a replayed message was captured; the completion says delivered; connection events say connected"
    )
    func publish() async throws {
        let broker = try await MosquittoBroker()
        defer { broker.stop() }
        let loop = EventLoop()
        defer { loop.shutdown() }
        let (observer, received) = try await Self.subscriber(broker, loop: loop, filter: "rt/#")
        let connected = Recorded<Bool>()
        let port = try await Self.port(broker, loop: loop) { port in port.connectionEvents { connected.append($0) } }
        try await eventually("the port says connected", within: 30) { connected.all.contains(true) }
        let delivered = Recorded<Bool>()
        port.publish(
            MQTTOutboundMessage(
                topic: "rt/state", payload: Array("21.5".utf8), qos: 1, retain: false, correlationData: [1, 2, 3],
                capturedAt: 1_700_000_000_000)
        ) { delivered.append($0) }
        try await eventually("the message arrives", within: 30) { received.count == 1 }
        try await eventually("the publish completes", within: 30) { delivered.all == [true] }
        let message = try #require(received.all.first)
        #expect(message.topic == "rt/state" && message.payloadString == "21.5" && message.qos == .atLeastOnce)
        #expect(!message.retain)
        #expect(message.properties.correlationData == [1, 2, 3])
        #expect(
            message.properties.userProperties == [
                MQTTUserProperty("captured_at", Timestamp.string(milliseconds: 1_700_000_000_000))
            ])

        // A replay batch: every message acknowledged, in order.
        let batch = Recorded<[Bool]>()
        port.publishInOrder(
            (1...5).map {
                MQTTOutboundMessage(topic: "rt/replay", payload: Array("m\($0)".utf8), qos: 1, retain: false)
            }
        ) { batch.append($0) }
        try await eventually("the batch completes", within: 30) { batch.count == 1 }
        #expect(batch.all == [[true, true, true, true, true]])
        try await eventually("the batch arrives", within: 30) { received.count == 6 }
        #expect(received.all.dropFirst().map(\.payloadString) == ["m1", "m2", "m3", "m4", "m5"])
        #expect(port.backlog == 0)
        await port.client.disconnect()
        await observer.disconnect()
    }

    @Test("with MQTT 3.1.1 a message carries no properties (a 3.1.1 client refuses them) and still arrives")
    func v311() async throws {
        let outbound = MQTTOutboundMessage(
            topic: "rt/v3", payload: [1], qos: 1, retain: true, correlationData: [9], capturedAt: 1)
        #expect(ClientMQTTPort.message(outbound, v5: false).properties.isEmpty)
        #expect(!ClientMQTTPort.message(outbound, v5: true).properties.isEmpty)
        let broker = try await MosquittoBroker()
        defer { broker.stop() }
        let loop = EventLoop()
        defer { loop.shutdown() }
        let (observer, received) = try await Self.subscriber(broker, loop: loop, filter: "rt/#")
        let port = try await Self.port(broker, loop: loop, version: .v311)
        let delivered = Recorded<Bool>()
        port.publish(outbound) { delivered.append($0) }
        try await eventually("the message arrives", within: 30) { received.count == 1 }
        try await eventually("the publish completes", within: 30) { delivered.count == 1 }
        #expect(delivered.all == [true])
        #expect(received.all.first?.payload == [1])
        await port.client.disconnect()
        await observer.disconnect()
    }

    @Test(
        "subscribe: messages on the filter reach the handler with their response topic, correlation data and retain flag (retained as published, also live); after cancel none do"
    )
    func subscribe() async throws {
        let broker = try await MosquittoBroker()
        defer { broker.stop() }
        let loop = EventLoop()
        defer { loop.shutdown() }
        let publisher = try MQTTClient(
            configuration: try MQTTConfiguration(url: broker.url, clientID: "publisher-\(UUID().uuidString.prefix(8))"),
            loop: loop)
        try await publisher.connect()
        // Retained before the subscription: replayed by the broker once the SUBSCRIBE arrives.
        try await publisher.publish(MQTTMessage(topic: "rt/cmd/lamp", string: "held", retain: true))
        let port = try await Self.port(broker, loop: loop)
        let inbound = Recorded<MQTTInboundMessage>()
        let registration = try port.subscribe("rt/cmd/+") { inbound.append($0) }
        try await eventually("the retained command arrives", within: 30) { inbound.count == 1 }
        #expect(inbound.all.first?.retain == true && inbound.all.first?.payload == Array("held".utf8))
        var properties = MQTTProperties()
        properties.responseTopic = "rt/response"
        properties.correlationData = [7, 7]
        try await publisher.publish(MQTTMessage(topic: "rt/cmd/lamp", string: "on", properties: properties))
        try await publisher.publish(MQTTMessage(topic: "rt/cmd/fan", string: "live-retained", retain: true))
        try await eventually("both live messages arrive", within: 30) { inbound.count == 3 }
        let live = inbound.all[1]
        #expect(live.topic == "rt/cmd/lamp" && live.payload == Array("on".utf8) && !live.retain)
        #expect(live.responseTopic == "rt/response" && live.correlationData == [7, 7])
        #expect(inbound.all[2].retain, "a command published retained is seen as retained when it arrives live too")
        registration.cancel()
        try await Task.sleep(for: .milliseconds(300))
        try await publisher.publish(MQTTMessage(topic: "rt/cmd/lamp", string: "late"))
        try await Task.sleep(for: .milliseconds(500))
        #expect(inbound.count == 3)
        await port.client.disconnect()
        await publisher.disconnect()
    }
}

/// Values appended from any thread, read by the test.
final class Recorded<Value: Sendable>: Sendable {
    private let values = Mutex<[Value]>([])
    func append(_ value: Value) { values.withLock { $0.append(value) } }
    var all: [Value] { values.withLock { $0 } }
    var count: Int { values.withLock { $0.count } }
}
