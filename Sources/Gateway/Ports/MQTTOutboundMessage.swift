/// A message the gateway publishes.
public struct MQTTOutboundMessage: Sendable, Hashable {
    public var topic: String
    public var payload: [UInt8]
    /// 0, 1 or 2.
    public var qos: Int
    public var retain: Bool
    /// MQTT 5 correlation data (set on command responses that go to a response topic).
    public var correlationData: [UInt8]?
    /// Set only on messages replayed from the store-and-forward queue: when the message was
    /// captured, in milliseconds since 1970. An MQTT 5 client should send it as the user
    /// property `captured_at` (ISO 8601, written by ``Timestamp``); with 3.1.1 it is
    /// dropped (state payloads carry the capture time as `last_seen` anyway). Inside the
    /// gateway a state held for Home Assistant carries it into the stage, which keeps it for
    /// the queue and removes it when the message goes out live.
    public var capturedAt: Int64?

    public init(
        topic: String, payload: [UInt8], qos: Int, retain: Bool, correlationData: [UInt8]? = nil,
        capturedAt: Int64? = nil
    ) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.correlationData = correlationData
        self.capturedAt = capturedAt
    }

    /// The payload as text (for logs and tests).
    public var payloadText: String { String(decoding: payload, as: UTF8.self) }
}
