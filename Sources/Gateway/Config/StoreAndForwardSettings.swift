import JSON

/// `store_and_forward` in config.json: the bounded queue that holds outgoing messages while the
/// broker is unreachable (docs/operations.md).
public struct StoreAndForwardSettings: Sendable, Equatable {
    /// Queue while offline at all (false: messages go to the MQTT client, which keeps what its
    /// own queue allows).
    public var enabled = true
    /// At most this many messages; the oldest are dropped (and counted) beyond it. Also the
    /// bound of a burst that outruns the broker (flow control): 32 B of memory each with a
    /// queue file (the messages are read back from it), about 200 B each in memory only.
    public var maxMessages = 100_000
    /// At most this many bytes of messages (topic + payload); the oldest are dropped beyond it.
    public var maxBytes = 16 * 1024 * 1024
    /// Messages older than this (by capture time) are dropped instead of replayed.
    public var maxAge: Double = 24 * 3600
    /// Also queue QoS 0 messages (by default they are dropped while offline, as QoS 0 promises).
    public var queueQoS0 = false

    public init() {}

    init(_ object: inout ConfigObject) {
        enabled = object.read("enabled", default: enabled) { try $0.bool() }
        maxMessages = object.read("max_messages", default: maxMessages) { try $0.integer(in: 1...10_000_000) }
        maxBytes = object.read("max_bytes", default: maxBytes) { try $0.integer(in: 1024...(1 << 40)) }
        maxAge = object.read("max_age", default: maxAge) { try $0.positiveDuration() }
        queueQoS0 = object.read("queue_qos0", default: queueQoS0) { try $0.bool() }
        object.finish()
    }
}
