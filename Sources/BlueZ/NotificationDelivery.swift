/// What ``CentralManager/notifications(for:handler:)`` hands its handler.
public enum NotificationDelivery: Sendable, Hashable {
    /// A notified or indicated value.
    case value([UInt8])
    /// The subscription ended (no more values): nil error after a disconnect this manager asked
    /// for or ``CentralManager/close()``, else why (the characteristic cannot notify, is gone).
    case ended(CentralError?)
}

/// Names a ``CentralManager/notifications(for:handler:)`` consumer, to end it with
/// ``CentralManager/endNotifications(_:)``.
public struct NotificationToken: Sendable, Hashable {
    let characteristic: Characteristic
    let id: Int
}

/// Names a ``CentralManager/scan(_:handler:)``, to end it with ``CentralManager/stopScan(_:)``.
public struct ScanToken: Sendable, Hashable {
    let id: Int
}

/// Names a ``CentralManager/connectionEvents(handler:)`` registration.
public struct ConnectionEventsToken: Sendable, Hashable {
    let id: Int
}

/// Where events of one kind go: a stream's continuation, or a handler called on the loop thread.
enum EventSink<Event: Sendable> {
    case stream(AsyncStream<Event>.Continuation)
    case handler(@Sendable (Event) -> Void)

    func deliver(_ event: Event) {
        switch self {
        case .stream(let continuation): continuation.yield(event)
        case .handler(let handler): handler(event)
        }
    }
}
