import Bluetooth
import Gateway
import JSON
import Testing

/// The store-and-forward stage as flow control while connected: when the MQTT client already
/// holds half of what it may (`mqtt.max_queued`), readings wait in the stage's queue, in order,
/// instead of being handed to a client that would refuse them.
@Suite("Flow control: a broker slower than the readings")
struct FlowControlTests {
    static let sensor = address("A4:C1:38:00:00:01")

    static func reading(_ centidegrees: Int) -> BLEDiscovery {
        bthome(sensor, payload: [0x40, 0x02, UInt8(centidegrees & 0xFF), UInt8(centidegrees >> 8)])
    }

    @Test(
        "with the client at half its bound, readings go through the queue in order (with capture times) and none reaches a full client; live again once it drains"
    )
    func slowBroker() async throws {
        let harness = try Harness(#"{"mqtt": {"qos": 1}, "devices": [{"match": {"services": ["FCD2"]}}]}"#)
        harness.mqtt.backlogLimit = 10
        try await harness.start()
        await harness.gateway.handle(Self.reading(2001))
        harness.mqtt.backlog = 5
        for step in 2...4 {
            await harness.advance(10)
            await harness.gateway.handle(Self.reading(2000 + step))
        }
        let states = await harness.mqtt.waitFor("gattway/A4C138000001", count: 4)
        #expect(
            states.map { json($0.payloadText)?["temperature"] } == [
                .number(20.01), .number(20.02), .number(20.03), .number(20.04),
            ])
        #expect(states.first?.capturedAt == nil, "the first reading went out live")
        #expect(states.dropFirst().allSatisfy { $0.capturedAt != nil }, "the others waited in the stage's queue")
        let statistics = await harness.gateway.outboxStatistics
        #expect(statistics?.spilled == 3)
        #expect(statistics?.droppedFull == 0)

        harness.mqtt.backlog = 0
        await harness.settle()
        #expect(await harness.gateway.outboxStatistics?.depth == 0, "the queue drained")
        await harness.advance(10)
        await harness.gateway.handle(Self.reading(2005))
        let after = harness.mqtt.messages(on: "gattway/A4C138000001")
        #expect(after.count == 5)
        #expect(after.last?.capturedAt == nil, "live again once the client has room")
        #expect(await harness.gateway.healthPayload["queue"]?["spilled"] == .number(3))
    }

    @Test("QoS 0 readings and a port without a bound are never held back")
    func unboundedOrQoS0() async throws {
        for (qos, limit) in [(0, 10 as Int?), (1, nil)] {
            let harness = try Harness(#"{"mqtt": {"qos": \#(qos)}, "devices": [{"match": {"services": ["FCD2"]}}]}"#)
            harness.mqtt.backlogLimit = limit
            harness.mqtt.backlog = 1_000
            try await harness.start()
            await harness.gateway.handle(Self.reading(2001))
            #expect(
                harness.mqtt.messages(on: "gattway/A4C138000001").map(\.capturedAt) == [nil],
                "qos \(qos), limit \(String(describing: limit))")
            #expect(await harness.gateway.outboxStatistics?.spilled == 0)
        }
    }
}
