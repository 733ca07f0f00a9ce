/// The messages of one subscription, as an `AsyncSequence`, from ``MQTTClient/subscribe(to:qos:)``.
///
/// Buffering: unbounded — every matching message is kept until iterated, so a consumer that
/// stops iterating without ending the subscription grows memory. Ending: the sequence finishes
/// after ``MQTTClient/unsubscribe(_:)`` or ``MQTTClient/disconnect()``; when the iterating task
/// is cancelled or the sequence is dropped, the client unsubscribes from the broker (unless
/// another subscription uses the same filter). ``MQTTClient/withSubscription(to:qos:_:)``
/// scopes a subscription to a closure. Messages matching several of the client's
/// subscriptions are delivered to each of them.
public struct MQTTSubscription: AsyncSequence, Sendable {
    public typealias Element = MQTTMessage
    public typealias Failure = Never

    /// The subscribed filter.
    public let filter: MQTTTopicFilter
    /// The QoS the broker granted in SUBACK (at most the one requested).
    public let grantedQoS: MQTTQoS
    let id: UInt64
    let stream: AsyncStream<MQTTMessage>

    public func makeAsyncIterator() -> AsyncStream<MQTTMessage>.Iterator { stream.makeAsyncIterator() }
}

/// A subscription whose messages go to a handler on the loop thread, from
/// ``MQTTClient/subscribe(to:qos:retainAsPublished:handler:)``; ends with
/// ``MQTTClient/unsubscribe(_:)-(MQTTHandlerSubscription)`` or ``MQTTClient/disconnect()``.
public struct MQTTHandlerSubscription: Sendable, Hashable {
    /// The subscribed filter.
    public let filter: MQTTTopicFilter
    let id: UInt64
}
