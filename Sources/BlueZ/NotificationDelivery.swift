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

/// Names a ``CentralManager/stateUpdates(handler:)`` or ``PeripheralManager/stateUpdates(handler:)``
/// registration.
public struct StateUpdatesToken: Sendable, Hashable {
    let id: Int
}

/// Names a ``PeripheralManager/events(handler:)`` registration.
public struct PeripheralEventsToken: Sendable, Hashable {
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

extension Dictionary where Key == Int {
    /// Registers `handler` as the sink `id`, unless the manager is `closed` (then nothing is
    /// told to it); returns `id`, for the registration's token.
    mutating func addHandler<Event>(_ handler: @escaping @Sendable (Event) -> Void, id: Int, unlessClosed closed: Bool)
        -> Int where Value == EventSink<Event>
    {
        if !closed { self[id] = .handler(handler) }
        return id
    }
}
