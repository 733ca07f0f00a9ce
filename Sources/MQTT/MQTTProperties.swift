/// The MQTT 5 properties of a PUBLISH (and of a last will) that gattway uses (MQTT 5 §3.3.2.3).
///
/// Sent only when the client speaks MQTT 5; with 3.1.1 a publish with non-empty properties fails
/// with ``MQTTError/Kind/invalidConfiguration``. Received messages carry what the broker forwarded.
public struct MQTTProperties: Sendable, Hashable {
    /// Name/value pairs in order; names may repeat (MQTT 5 §3.3.2.3.7).
    public var userProperties: [MQTTUserProperty]
    /// Where the receiver should send its response.
    public var responseTopic: String?
    /// Opaque bytes the requester uses to match a response to its request.
    public var correlationData: [UInt8]?
    /// Seconds after which the broker drops the message if it has not delivered it.
    public var messageExpiryInterval: UInt32?
    /// MIME type of the payload, e.g. `application/json`.
    public var contentType: String?
    /// True when the payload is UTF-8 text (payload format indicator 1).
    public var payloadIsUTF8: Bool?

    public init(
        userProperties: [MQTTUserProperty] = [], responseTopic: String? = nil,
        correlationData: [UInt8]? = nil, messageExpiryInterval: UInt32? = nil,
        contentType: String? = nil, payloadIsUTF8: Bool? = nil
    ) {
        self.userProperties = userProperties
        self.responseTopic = responseTopic
        self.correlationData = correlationData
        self.messageExpiryInterval = messageExpiryInterval
        self.contentType = contentType
        self.payloadIsUTF8 = payloadIsUTF8
    }

    /// True when no property is set.
    public var isEmpty: Bool {
        userProperties.isEmpty && responseTopic == nil && correlationData == nil
            && messageExpiryInterval == nil && contentType == nil && payloadIsUTF8 == nil
    }
}

/// One MQTT 5 user property: a UTF-8 name/value pair.
public struct MQTTUserProperty: Sendable, Hashable, CustomStringConvertible {
    public var name: String
    public var value: String
    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
    public var description: String { "\(name)=\(value)" }
}
