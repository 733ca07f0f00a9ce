import JSON

/// Where the core's messages go: through the store-and-forward stage when it is enabled, else
/// straight to the MQTT port. Every feature publishes through this one object. Loop-confined.
final class Output {
    let mqtt: any MQTTPort
    /// The store-and-forward stage (nil when disabled), opened by ``Gateway/start()``.
    var outbox: StoreAndForward?
    /// `mqtt.qos`: the QoS of messages that name none.
    let qos: Int
    /// Messages published so far (`published` in `bridge/health`).
    private(set) var published = 0
    /// A buffer reused for payloads that are copied out when published.
    var scratch: [UInt8] = []
    /// The MQTT port's connection as last reported (assumed up from the start, as the
    /// store-and-forward stage does, until the port says otherwise).
    private(set) var connected = true
    /// Told every message as it is published until removed, each under a token (a page action
    /// waiting for its response: ``Gateway/pageSend(_:body:answer:)``). Empty but for those waits.
    private var watchers: [(token: Int, handler: (MQTTOutboundMessage) -> Void)] = []
    private var lastToken = 0

    init(mqtt: any MQTTPort, qos: Int) {
        self.mqtt = mqtt
        self.qos = qos
    }

    /// A new token for ``watch(_:handler:)`` (also a request's unique transaction).
    func newToken() -> Int {
        lastToken += 1
        return lastToken
    }

    /// Tells `handler` every message published from now until ``unwatch(_:)`` with `token`.
    func watch(_ token: Int, handler: @escaping (MQTTOutboundMessage) -> Void) {
        watchers.append((token, handler))
    }

    func unwatch(_ token: Int) { watchers.removeAll { $0.token == token } }

    /// The MQTT port's connection came up or was lost: the store-and-forward stage switches mode.
    func connectionChanged(_ connected: Bool) {
        self.connected = connected
        outbox?.connectionChanged(connected)
    }

    /// Publishes a copy of `payload` (usually ``scratch``).
    func publish(
        _ topic: String, _ payload: [UInt8], retain: Bool, qos: Int? = nil, correlationData: [UInt8]? = nil,
        kind: OutboundKind = .stored
    ) {
        publish(
            topic, owned: Self.exactCopy(payload), retain: retain, qos: qos, correlationData: correlationData,
            kind: kind)
    }

    /// Publishes `payload` without copying it: for a buffer made for this one message, which
    /// nothing writes into afterwards.
    func publish(
        _ topic: String, owned payload: [UInt8], retain: Bool, qos: Int? = nil, correlationData: [UInt8]? = nil,
        kind: OutboundKind = .stored
    ) {
        send(
            MQTTOutboundMessage(
                topic: topic, payload: payload, qos: qos ?? self.qos, retain: retain,
                correlationData: correlationData), kind: kind)
    }

    /// Publishes `json`, written into ``scratch``.
    func publish(_ topic: String, json: JSONValue, retain: Bool, qos: Int? = nil, kind: OutboundKind = .stored) {
        scratch.removeAll(keepingCapacity: true)
        json.write(into: &scratch)
        publish(topic, scratch, retain: retain, qos: qos, kind: kind)
    }

    /// Publishes a message made earlier (a state held for Home Assistant, stamped with its
    /// capture time): queued, it keeps that time; live, it goes out without it.
    func send(_ message: MQTTOutboundMessage, kind: OutboundKind = .stored) {
        published += 1
        if !watchers.isEmpty { for watcher in watchers { watcher.handler(message) } }
        if let outbox {
            outbox.publish(message, kind: kind)
        } else if message.capturedAt != nil {
            var live = message
            live.capturedAt = nil
            mqtt.publish(live)
        } else {
            mqtt.publish(message)
        }
    }

    /// An exact-size copy of a payload that is usually ``scratch``, whose buffer has the capacity
    /// of the largest message so far. Sharing it would make the next write into ``scratch`` copy
    /// that whole capacity and leave every waiting message holding a buffer of that size — ~4 KB
    /// per queued 90-byte state (BENCHMARKS.md).
    static func exactCopy(_ payload: [UInt8]) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: payload.count) { buffer, count in
            count = buffer.initialize(fromContentsOf: payload)
        }
    }
}
