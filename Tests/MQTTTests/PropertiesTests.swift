import EventLoop
import Foundation
import MQTT
import TestSupport
import Testing

@Suite("MQTT 5 properties")
struct PropertiesTests {
    @Test("user properties, response topic, correlation data, content type and expiry reach a subscriber")
    func propertiesArrive() async throws {
        let broker = try await MosquittoBroker()
        let loop = EventLoop()
        defer { loop.shutdown() }
        try await withTimeout(120) {
            let subscriber = try MQTTClient(configuration: .test(broker.url, "sub"), loop: loop)
            try await subscriber.connect()
            let (received, _) = collect(try await subscriber.subscribe(to: "gattway/kitchen/set"))
            let publisher = try MQTTClient(configuration: .test(broker.url, "pub"), loop: loop)
            try await publisher.connect()
            let properties = MQTTProperties(
                userProperties: [MQTTUserProperty("source", "test"), MQTTUserProperty("source", "again")],
                responseTopic: "gattway/kitchen/response", correlationData: [0, 1, 2, 0xFF],
                messageExpiryInterval: 300, contentType: "application/json", payloadIsUTF8: true)
            try await publisher.publish(
                MQTTMessage(topic: "gattway/kitchen/set", string: #"{"state":"ON"}"#, properties: properties))
            try await eventually("the message") { received.count == 1 }
            let message = try #require(received.all.first)
            #expect(message.properties.userProperties == properties.userProperties)
            #expect(message.properties.responseTopic == "gattway/kitchen/response")
            #expect(message.properties.correlationData == [0, 1, 2, 0xFF])
            #expect(message.properties.contentType == "application/json")
            #expect(message.properties.payloadIsUTF8 == true)
            #expect((1...300).contains(message.properties.messageExpiryInterval ?? 0))
            await publisher.disconnect()
            await subscriber.disconnect()
        }
    }

    @Test("properties on a 3.1.1 connection fail the publish instead of being dropped silently")
    func propertiesNeedV5() async throws {
        let broker = try await MosquittoBroker()
        let loop = EventLoop()
        defer { loop.shutdown() }
        try await withTimeout(120) {
            let client = try MQTTClient(configuration: .test(broker.url, "v311", version: .v311), loop: loop)
            try await client.connect()
            let error = await #expect(throws: MQTTError.self) {
                try await client.publish(
                    MQTTMessage(topic: "a", string: "b", properties: MQTTProperties(contentType: "text/plain")))
            }
            #expect(error?.kind == .invalidConfiguration)
            await client.disconnect()
        }
    }
}
