/// One message in the store-and-forward queue: what to publish, when it was captured, and its
/// position in the queue (for acknowledging exactly this message after delivery).
public struct QueuedMessage: Sendable, Hashable {
    public var message: MQTTOutboundMessage
    /// Milliseconds since 1970 when the gateway produced the message.
    public var capturedAt: Int64
    /// Position in the queue file; increases by one per appended message.
    public var sequence: UInt64

    /// Bytes this message counts against `max_bytes`: topic, payload and correlation data.
    public var size: Int { message.topic.utf8.count + message.payload.count + (message.correlationData?.count ?? 0) }
}
