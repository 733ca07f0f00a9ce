/// An application message: published by ``MQTTClient/publish(_:)`` or received from a
/// subscription.
public struct MQTTMessage: Sendable, Hashable {
    /// The topic name (no wildcards), e.g. `gattway/kitchen`.
    public var topic: String
    /// The payload bytes, copied out of libmosquitto's buffer.
    public var payload: [UInt8]
    /// On publish: the requested QoS. On receipt: the QoS of delivery (the lower of the
    /// publisher's and the subscription's).
    public var qos: MQTTQoS
    /// On publish: ask the broker to retain the message. On receipt: the message is a retained
    /// one replayed on subscribe (not a live publish).
    public var retain: Bool
    /// MQTT 5 properties (empty with 3.1.1).
    public var properties: MQTTProperties

    public init(
        topic: String, payload: [UInt8], qos: MQTTQoS = .atLeastOnce, retain: Bool = false,
        properties: MQTTProperties = MQTTProperties()
    ) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.properties = properties
    }

    /// A message whose payload is `string` in UTF-8.
    public init(
        topic: String, string: String, qos: MQTTQoS = .atLeastOnce, retain: Bool = false,
        properties: MQTTProperties = MQTTProperties()
    ) {
        self.init(topic: topic, payload: Array(string.utf8), qos: qos, retain: retain, properties: properties)
    }

    /// The payload decoded as UTF-8 (invalid sequences replaced).
    public var payloadString: String { String(decoding: payload, as: UTF8.self) }
}
