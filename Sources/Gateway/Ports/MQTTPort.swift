/// What the gateway needs from an MQTT client, in the shape `MQTTClient` offers it: publishing
/// with a completion, subscription streams and connection changes.
///
/// Contract for an implementation:
/// - ``publish(_:)`` never blocks and never throws: messages are queued in order (also while
///   the broker is unreachable, as far as the client's queue allows) and a failure is counted by
///   the client; a message refused because the client's queue is full (`mqtt.max_queued`) is
///   counted in ``queueFullDrops`` (`dropped.mqtt_queue_full` in `bridge/health`). ``publishAndWait(_:)`` returns when the message was delivered (PUBACK for QoS 1)
///   or failed — the gateway uses it only for `bridge/state` offline at shutdown.
/// - ``subscribe(_:)`` must not wait for the broker: while it is unreachable the gateway still has
///   to scan and queue readings. It returns the stream at once; the subscription is made (and
///   remade) whenever the client is connected, and the stream carries every matching message
///   (with MQTT 5 response topic and correlation data) until the client ends.
/// - ``connectionEvents()`` reports each (re)connection, so the gateway republishes its retained
///   state after the broker lost it. The last will (``Gateway/lastWill(for:)``) is configured
///   on the client by the composition root before connecting.
public protocol MQTTPort: Sendable {
    /// Queues `message` for publishing.
    func publish(_ message: MQTTOutboundMessage)

    /// Publishes `message` and returns when it was delivered or failed.
    func publishAndWait(_ message: MQTTOutboundMessage) async throws

    /// Subscribes to a topic filter (`gattway/+/set`) and returns its messages.
    func subscribe(_ filter: String) async throws -> AsyncStream<MQTTInboundMessage>

    /// Connection changes: `true` when (re)connected, `false` when the connection was lost.
    func connectionEvents() -> AsyncStream<Bool>

    /// Messages ``publish(_:)`` dropped so far because the client's queue was full.
    var queueFullDrops: Int { get }

    /// Received messages dropped so far because a subscription's stream was full (the gateway
    /// fell behind a flood); `dropped.mqtt_inbound_full` in `bridge/health`.
    var inboundDrops: Int { get }

    /// QoS 1/2 messages handed to ``publish(_:)`` or ``publishInOrder(_:)`` that the client still
    /// holds (not yet acknowledged by the broker, nor failed). Must not block; readable from any
    /// thread.
    var backlog: Int { get }

    /// How large ``backlog`` may grow before ``publish(_:)`` refuses messages (`mqtt.max_queued`);
    /// nil when the client's queue is unbounded. The store-and-forward stage keeps the backlog
    /// below it by queueing further messages itself (flow control, docs/operations.md).
    var backlogLimit: Int? { get }

    /// Publishes `messages` in this order and returns, for each, whether it was delivered (PUBACK
    /// at QoS 1). An implementation may have them all in flight at once; the default publishes
    /// one after another with ``publishAndWait(_:)`` and stops at the first failure (the rest
    /// report false, not attempted).
    func publishInOrder(_ messages: [MQTTOutboundMessage]) async -> [Bool]
}

extension MQTTPort {
    /// A port without a bounded queue never drops for that reason.
    public var queueFullDrops: Int { 0 }

    /// A port with unbounded subscription streams never drops a received message.
    public var inboundDrops: Int { 0 }

    /// A port that does not count reports an empty backlog.
    public var backlog: Int { 0 }

    /// No bound by default.
    public var backlogLimit: Int? { nil }

    public func publishInOrder(_ messages: [MQTTOutboundMessage]) async -> [Bool] {
        var results: [Bool] = []
        results.reserveCapacity(messages.count)
        for message in messages {
            guard results.last != false else {
                results.append(false)
                continue
            }
            do {
                try await publishAndWait(message)
                results.append(true)
            } catch {
                results.append(false)
            }
        }
        return results
    }
}
