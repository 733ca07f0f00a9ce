/// A message the gateway received on one of its subscriptions.
public struct MQTTInboundMessage: Sendable, Hashable {
    public var topic: String
    public var payload: [UInt8]
    /// MQTT 5 response topic: the command's response goes there instead of `<device>/response`.
    public var responseTopic: String?
    /// MQTT 5 correlation data, echoed on the response.
    public var correlationData: [UInt8]?
    public var retain: Bool

    public init(
        topic: String, payload: [UInt8], responseTopic: String? = nil, correlationData: [UInt8]? = nil,
        retain: Bool = false
    ) {
        self.topic = topic
        self.payload = payload
        self.responseTopic = responseTopic
        self.correlationData = correlationData
        self.retain = retain
    }
}
