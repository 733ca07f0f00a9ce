import Gateway
import MQTT

/// The gateway's ``MQTTPort`` over ``MQTTClient``.
struct ClientMQTTPort: MQTTPort {
    let client: MQTTClient

    static func message(_ outbound: MQTTOutboundMessage) -> MQTTMessage {
        var properties = MQTTProperties()
        properties.correlationData = outbound.correlationData
        if let captured = outbound.capturedAt {
            // A message replayed from the offline queue says when it was captured (MQTT 5 only;
            // state payloads carry it in last_seen as well).
            properties.userProperties.append(MQTTUserProperty("captured_at", Timestamp.string(milliseconds: captured)))
        }
        return MQTTMessage(
            topic: outbound.topic, payload: outbound.payload, qos: MQTTQoS(rawValue: outbound.qos) ?? .atLeastOnce,
            retain: outbound.retain, properties: properties)
    }

    func publish(_ message: MQTTOutboundMessage) {
        client.publish(Self.message(message))
    }

    var queueFullDrops: Int { client.queueFullCount }

    func publishAndWait(_ message: MQTTOutboundMessage) async throws {
        try await client.publish(Self.message(message))
    }

    /// Returns at once, without waiting for the broker's SUBACK: the client sends SUBSCRIBE
    /// when it is connected (now, or when the broker comes back). Waiting would hold up the
    /// gateway's start — scanning, BLE readings, the store-and-forward queue and READY=1 — for as
    /// long as the broker is unreachable.
    func subscribe(_ filter: String) async throws -> AsyncStream<MQTTInboundMessage> {
        let topicFilter = try MQTTTopicFilter(filter)
        let client = self.client
        return AsyncStream(bufferingPolicy: .unbounded) { continuation in
            let task = Task {
                guard let subscription = try? await client.subscribe(to: topicFilter) else {
                    continuation.finish()
                    return
                }
                for await message in subscription {
                    continuation.yield(
                        MQTTInboundMessage(
                            topic: message.topic, payload: message.payload, responseTopic: message.properties.responseTopic,
                            correlationData: message.properties.correlationData, retain: message.retain))
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    func connectionEvents() -> AsyncStream<Bool> {
        let states = client.connectionStates()
        return AsyncStream(bufferingPolicy: .bufferingNewest(16)) { continuation in
            let task = Task {
                for await state in states {
                    switch state {
                    case .connected: continuation.yield(true)
                    case .disconnected: continuation.yield(false)
                    case .connecting: break
                    }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}
