/// A message the gateway publishes.
public struct MQTTOutboundMessage: Sendable, Hashable {
    public var topic: String
    public var payload: [UInt8]
    /// 0, 1 or 2.
    public var qos: Int
    public var retain: Bool
    /// MQTT 5 correlation data (set on command responses that go to a response topic).
    public var correlationData: [UInt8]?

    public init(topic: String, payload: [UInt8], qos: Int, retain: Bool, correlationData: [UInt8]? = nil) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.correlationData = correlationData
    }

    /// The payload as text (for logs and tests).
    public var payloadText: String { String(decoding: payload, as: UTF8.self) }
}
