import Gateway
import MQTT
import Synchronization

/// The gateway's ``MQTTPort`` over ``MQTTClient``.
struct ClientMQTTPort: MQTTPort {
    let client: MQTTClient
    /// Messages dropped because the gateway fell ``inboundLimit`` messages behind a subscription.
    let inbound = InboundDrops()

    /// How many received messages a subscription holds for the gateway before it drops new
    /// ones: a client flooding the command topics must not grow memory without bound.
    static let inboundLimit = 4096

    /// The client's message; MQTT 5 properties (correlation data, `captured_at`) only with
    /// `v5` — an MQTT 3.1.1 client refuses a message that has any.
    static func message(_ outbound: MQTTOutboundMessage, v5: Bool = true) -> MQTTMessage {
        var properties = MQTTProperties()
        if v5 {
            properties.correlationData = outbound.correlationData
            if let captured = outbound.capturedAt {
                // A message replayed from the queue says when it was captured (state payloads
                // carry it in last_seen as well, which is all MQTT 3.1.1 gets).
                properties.userProperties.append(MQTTUserProperty("captured_at", Timestamp.string(milliseconds: captured)))
            }
        }
        return MQTTMessage(
            topic: outbound.topic, payload: outbound.payload, qos: MQTTQoS(rawValue: outbound.qos) ?? .atLeastOnce,
            retain: outbound.retain, properties: properties)
    }

    private var isV5: Bool { client.configuration.protocolVersion == .v5 }

    func publish(_ message: MQTTOutboundMessage) {
        client.publish(Self.message(message, v5: isV5))
    }

    var queueFullDrops: Int { client.queueFullCount }

    var inboundDrops: Int { inbound.count.load(ordering: .relaxed) }

    var backlog: Int { client.backlogCount }

    var backlogLimit: Int? { client.configuration.maxQueued }

    /// All at once: the client keeps them in order (in flight up to `max_inflight`, the rest
    /// waiting behind), so a replay runs at the broker's acknowledgement rate instead of one
    /// round trip per message.
    func publishInOrder(_ messages: [MQTTOutboundMessage]) async -> [Bool] {
        guard !messages.isEmpty else { return [] }
        let client = self.client
        let v5 = isV5
        return await withCheckedContinuation { continuation in
            let results = BatchResults(count: messages.count, continuation)
            for (index, message) in messages.enumerated() {
                client.publish(Self.message(message, v5: v5)) { results.set(index, $0) }
            }
        }
    }

    func publishAndWait(_ message: MQTTOutboundMessage) async throws {
        try await client.publish(Self.message(message, v5: isV5))
    }

    /// Returns at once, without waiting for the broker's SUBACK: the client sends SUBSCRIBE
    /// when it is connected (now, or when the broker comes back). Waiting would hold up the
    /// gateway's start — scanning, BLE readings, the store-and-forward queue and READY=1 — for as
    /// long as the broker is unreachable.
    func subscribe(_ filter: String) async throws -> AsyncStream<MQTTInboundMessage> {
        let topicFilter = try MQTTTopicFilter(filter)
        let client = self.client
        let inbound = self.inbound
        return AsyncStream(bufferingPolicy: .bufferingOldest(Self.inboundLimit)) { continuation in
            let task = Task {
                // Retain as published: a command published retained is refused even when it
                // arrives live, not only when the broker replays it (Gateway.refuseRetained).
                guard let subscription = try? await client.subscribe(to: topicFilter, retainAsPublished: true) else {
                    continuation.finish()
                    return
                }
                for await message in subscription {
                    let result = continuation.yield(
                        MQTTInboundMessage(
                            topic: message.topic, payload: message.payload, responseTopic: message.properties.responseTopic,
                            correlationData: message.properties.correlationData, retain: message.retain))
                    if case .dropped = result { inbound.count.add(1, ordering: .relaxed) }
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

/// Collects the outcome of a batch of publishes and resumes the waiting replay once all are in.
private final class BatchResults: Sendable {
    private let state: Mutex<(results: [Bool], remaining: Int, continuation: CheckedContinuation<[Bool], Never>?)>

    init(count: Int, _ continuation: CheckedContinuation<[Bool], Never>) {
        state = Mutex((Array(repeating: false, count: count), count, continuation))
    }

    func set(_ index: Int, _ result: Result<Void, MQTTError>) {
        let done: ([Bool], CheckedContinuation<[Bool], Never>)? = state.withLock { state in
            if case .success = result { state.results[index] = true }
            state.remaining -= 1
            guard state.remaining == 0, let continuation = state.continuation else { return nil }
            state.continuation = nil
            return (state.results, continuation)
        }
        if let (results, continuation) = done { continuation.resume(returning: results) }
    }
}

/// The count behind ``ClientMQTTPort/inboundDrops``, shared by the port's subscriptions.
final class InboundDrops: Sendable {
    let count = Atomic<Int>(0)
}
