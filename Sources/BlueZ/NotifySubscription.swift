import DBus

/// A characteristic this manager receives notifications for, with its consumers and how it is
/// subscribed in BlueZ now. Actor-confined (``CentralManager``).
final class NotifySubscription {
    enum Mode {
        /// Not subscribed in BlueZ (yet, or any more: link down with AcquireNotify, bluetoothd restart).
        case inactive
        /// A StartNotify/AcquireNotify call is running.
        case activating
        /// A StartNotify session: values come as `PropertiesChanged(Value)`; BlueZ keeps the
        /// session across link drops (sticky) and re-arms it on reconnection.
        case started
        /// An AcquireNotify socket; it hangs up on disconnect and is acquired again afterwards.
        case acquired(NotifySocket)
    }

    let characteristic: Characteristic
    /// Where values go: a stream that keeps the newest (``CentralManager/notifications(for:bufferingNewest:)``)
    /// or a flow-controlled channel (``CentralManager/notifications(for:pausingAbove:)``).
    enum Consumer {
        case stream(AsyncThrowingStream<[UInt8], any Error>.Continuation)
        case channel(NotificationChannel)
        /// ``CentralManager/notifications(for:handler:)``: called on the loop thread.
        case handler(@Sendable (NotificationDelivery) -> Void)
    }

    var consumers: [Int: Consumer] = [:]
    var mode: Mode = .inactive
    var path: DBusObjectPath?

    init(_ characteristic: Characteristic) {
        self.characteristic = characteristic
    }

    var isActiveOrActivating: Bool {
        switch mode {
        case .inactive: false
        case .activating, .started: true
        case .acquired(let socket): socket.isOpen
        }
    }

    /// Hands a value to every consumer; a full flow-controlled one pauses the acquired socket.
    func deliver(_ bytes: [UInt8]) {
        var pause = false
        for consumer in consumers.values {
            switch consumer {
            case .stream(let continuation): continuation.yield(bytes)
            case .channel(let channel): if channel.push(bytes) { pause = true }
            case .handler(let handler): handler(.value(bytes))
            }
        }
        if pause, case .acquired(let socket) = mode { socket.pause() }
    }

    /// Reads the acquired socket again once no flow-controlled consumer is above its mark.
    func resumeIfDrained() {
        guard case .acquired(let socket) = mode, socket.isPaused else { return }
        for case .channel(let channel) in consumers.values where channel.isPaused { return }
        socket.resume()
    }

    func finish(throwing error: CentralError?) {
        let all = consumers.values
        consumers.removeAll()
        for consumer in all {
            switch consumer {
            case .stream(let continuation): continuation.finish(throwing: error)
            case .channel(let channel): channel.finish(throwing: error)
            case .handler(let handler): handler(.ended(error))
            }
        }
    }

    /// The link dropped: an acquired socket is gone; a StartNotify session stays (sticky).
    func linkDown() {
        if case .acquired(let socket) = mode {
            socket.close()
            mode = .inactive
        }
    }

    /// bluetoothd went away: every session and socket is gone.
    func reset() {
        if case .acquired(let socket) = mode { socket.close() }
        mode = .inactive
        path = nil
    }
}
