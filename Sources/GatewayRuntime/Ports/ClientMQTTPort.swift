import Gateway
import MQTT
import Synchronization

/// The gateway's ``MQTTPort`` over ``MQTTClient``: received messages, connection changes and
/// publish completions reach the gateway synchronously on the loop thread that runs both the
/// client and the gateway, inside the libmosquitto call that produced them (docs/architecture.md).
/// Nothing queues between the socket and the gateway, so nothing is dropped there
/// (`inboundDrops` is 0): a flood is held back by TCP and the broker's own queue for this client.
public struct ClientMQTTPort: MQTTPort {
    public let client: MQTTClient
    /// The QoS of every subscription (`mqtt.subscription_qos`).
    public var subscriptionQoS: MQTTQoS = .atLeastOnce

    public init(client: MQTTClient, subscriptionQoS: MQTTQoS = .atLeastOnce) {
        self.client = client
        self.subscriptionQoS = subscriptionQoS
    }

    /// The client's message; MQTT 5 properties (correlation data, `captured_at`) only with
    /// `v5` — an MQTT 3.1.1 client refuses a message that has any.
    public static func message(_ outbound: MQTTOutboundMessage, v5: Bool = true) -> MQTTMessage {
        var properties = MQTTProperties()
        if v5 {
            properties.correlationData = outbound.correlationData
            if let captured = outbound.capturedAt {
                // A message replayed from the queue says when it was captured (state payloads
                // carry it in last_seen as well, which is all MQTT 3.1.1 gets).
                properties.userProperties.append(
                    MQTTUserProperty("captured_at", Timestamp.string(milliseconds: captured)))
            }
        }
        return MQTTMessage(
            topic: outbound.topic, payload: outbound.payload, qos: MQTTQoS(rawValue: outbound.qos) ?? .atLeastOnce,
            retain: outbound.retain, properties: properties)
    }

    private var isV5: Bool { client.configuration.protocolVersion == .v5 }

    public func publish(_ message: MQTTOutboundMessage) {
        client.publish(Self.message(message, v5: isV5))
    }

    public func publish(_ message: MQTTOutboundMessage, completion: @escaping @Sendable (Bool) -> Void) {
        client.publish(Self.message(message, v5: isV5)) { result in
            if case .success = result { completion(true) } else { completion(false) }
        }
    }

    public var queueFullDrops: Int { client.queueFullCount }

    public var backlog: Int { client.backlogCount }

    public var backlogLimit: Int? { client.configuration.maxQueued }

    /// All at once: the client keeps them in order (in flight up to `max_inflight`, the rest
    /// waiting behind), so a replay runs at the broker's acknowledgement rate instead of one
    /// round trip per message.
    public func publishInOrder(_ messages: [MQTTOutboundMessage], completion: @escaping @Sendable ([Bool]) -> Void) {
        guard !messages.isEmpty else { return completion([]) }
        let v5 = isV5
        let results = BatchResults(count: messages.count, completion)
        for (index, message) in messages.enumerated() {
            client.publish(Self.message(message, v5: v5)) { results.set(index, $0) }
        }
    }

    /// Returns at once, without waiting for the broker's SUBACK: the client sends SUBSCRIBE
    /// when it is connected (now, or when the broker comes back). Waiting would hold up the
    /// gateway's start — scanning, BLE readings, the store-and-forward queue and READY=1 — for as
    /// long as the broker is unreachable.
    public func subscribe(_ filter: String, _ deliver: @escaping @Sendable (MQTTInboundMessage) -> Void) throws
        -> PortRegistration
    {
        let client = self.client
        // Retain as published: a command published retained is refused even when it arrives
        // live, not only when the broker replays it (CommandRunner.refuseRetained).
        let subscription = client.subscribe(
            to: try MQTTTopicFilter(filter), qos: subscriptionQoS, retainAsPublished: true
        ) { message in
            deliver(
                MQTTInboundMessage(
                    topic: message.topic, payload: message.payload, responseTopic: message.properties.responseTopic,
                    correlationData: message.properties.correlationData, retain: message.retain))
        }
        return PortRegistration { client.unsubscribe(subscription) }
    }

    public func connectionEvents(_ deliver: @escaping @Sendable (Bool) -> Void) {
        client.observeConnectionStates { state in
            switch state {
            case .connected: deliver(true)
            case .disconnected: deliver(false)
            case .connecting: break
            }
        }
    }
}

/// Collects the outcome of a batch of publishes and reports it once all are in (their
/// completions run on the loop thread; the lock keeps the type honest for any thread).
private final class BatchResults: Sendable {
    private let state: Mutex<(results: [Bool], remaining: Int, completion: (@Sendable ([Bool]) -> Void)?)>

    init(count: Int, _ completion: @escaping @Sendable ([Bool]) -> Void) {
        state = Mutex((Array(repeating: false, count: count), count, completion))
    }

    func set(_ index: Int, _ result: Result<Void, MQTTError>) {
        let done: ([Bool], @Sendable ([Bool]) -> Void)? = state.withLock { state in
            if case .success = result { state.results[index] = true }
            state.remaining -= 1
            guard state.remaining == 0, let completion = state.completion else { return nil }
            state.completion = nil
            return (state.results, completion)
        }
        if let (results, completion) = done { completion(results) }
    }
}
