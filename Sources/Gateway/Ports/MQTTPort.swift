/// What the gateway needs from an MQTT client, in the shape `MQTTClient` offers it: publishing
/// with completions, subscriptions and connection changes delivered to closures.
///
/// Like ``BLEPort``, inputs are pushed: a production port calls `deliver` and completions on the
/// gateway's event loop thread, inside the libmosquitto call that received the packet (no
/// stream, no task, no buffer in between); a port may call them on another thread, and the
/// gateway then queues them to its loop.
///
/// Contract for an implementation:
/// - ``publish(_:)`` never blocks and never throws: messages are queued in order (also while
///   the broker is unreachable, as far as the client's queue allows) and a failure is counted by
///   the client; a message refused because the client's queue is full (`mqtt.max_queued`) is
///   counted in ``queueFullDrops`` (`dropped.mqtt_queue_full` in `bridge/health`).
///   ``publish(_:completion:)`` reports whether the message was delivered (PUBACK for QoS 1,
///   written for QoS 0) or failed.
/// - ``subscribe(_:_:)`` must not wait for the broker: while it is unreachable the gateway still
///   has to scan and queue readings. The subscription is made (and remade) whenever the client
///   is connected, and `deliver` gets every matching message (with MQTT 5 response topic and
///   correlation data) until the registration is cancelled.
/// - ``connectionEvents(_:)`` reports each (re)connection, so the gateway republishes its
///   retained state after the broker lost it. The last will (``Gateway/lastWill(for:)``) is
///   configured on the client by the composition root before connecting.
public protocol MQTTPort: Sendable {
    /// Queues `message` for publishing.
    func publish(_ message: MQTTOutboundMessage)

    /// Publishes `message` and calls `completion` once with whether it was delivered.
    func publish(_ message: MQTTOutboundMessage, completion: @escaping @Sendable (Bool) -> Void)

    /// Subscribes to a topic filter (`gattway/+/set`) and hands its messages to `deliver`.
    func subscribe(_ filter: String, _ deliver: @escaping @Sendable (MQTTInboundMessage) -> Void) throws
        -> PortRegistration

    /// Hands connection changes to `deliver`: `true` when (re)connected, `false` when the
    /// connection was lost.
    func connectionEvents(_ deliver: @escaping @Sendable (Bool) -> Void)

    /// Messages ``publish(_:)`` dropped so far because the client's queue was full.
    var queueFullDrops: Int { get }

    /// Received messages dropped so far before they reached the gateway
    /// (`dropped.mqtt_inbound_full` in `bridge/health`). A port that delivers each message as it
    /// is read queues nothing and drops nothing: 0.
    var inboundDrops: Int { get }

    /// QoS 1/2 messages handed to ``publish(_:)`` or ``publishInOrder(_:completion:)`` that the
    /// client still holds (not yet acknowledged by the broker, nor failed). Must not block;
    /// readable from any thread.
    var backlog: Int { get }

    /// How large ``backlog`` may grow before ``publish(_:)`` refuses messages (`mqtt.max_queued`);
    /// nil when the client's queue is unbounded. The store-and-forward stage keeps the backlog
    /// below it by queueing further messages itself (flow control, docs/operations.md).
    var backlogLimit: Int? { get }

    /// Publishes `messages` in this order and calls `completion` once with, for each, whether it
    /// was delivered (PUBACK at QoS 1). An implementation may have them all in flight at once;
    /// the default publishes one after another and stops at the first failure (the rest report
    /// false, not attempted).
    func publishInOrder(_ messages: [MQTTOutboundMessage], completion: @escaping @Sendable ([Bool]) -> Void)
}

extension MQTTPort {
    /// A port without a bounded queue never drops for that reason.
    public var queueFullDrops: Int { 0 }

    /// A port that delivers messages as it reads them never drops one.
    public var inboundDrops: Int { 0 }

    /// A port that does not count reports an empty backlog.
    public var backlog: Int { 0 }

    /// No bound by default.
    public var backlogLimit: Int? { nil }

    public func publishInOrder(_ messages: [MQTTOutboundMessage], completion: @escaping @Sendable ([Bool]) -> Void) {
        publishSequentially(messages[...], results: [], completion: completion)
    }

    private func publishSequentially(
        _ rest: ArraySlice<MQTTOutboundMessage>, results: [Bool], completion: @escaping @Sendable ([Bool]) -> Void
    ) {
        guard let next = rest.first else { return completion(results) }
        publish(next) { delivered in
            guard delivered else {
                return completion(results + [false] + Array(repeating: false, count: rest.count - 1))
            }
            self.publishSequentially(rest.dropFirst(), results: results + [true], completion: completion)
        }
    }
}

extension MQTTPort {
    /// Publishes `message` (not through the store-and-forward stage) and waits for the port's
    /// completion; false when it failed or the task was cancelled first (the wait ends at once
    /// then, whatever the port does later).
    func publishAndWait(_ message: MQTTOutboundMessage) async -> Bool {
        let first = FirstOutcome<Bool>()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                first.wait(continuation)
                publish(message) { first.resolve($0) }
            }
        } onCancel: {
            first.resolve(false)
        }
    }
}
