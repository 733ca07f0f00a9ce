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
    var consumers: [Int: AsyncThrowingStream<[UInt8], any Error>.Continuation] = [:]
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

    func deliver(_ bytes: [UInt8]) {
        for continuation in consumers.values { continuation.yield(bytes) }
    }

    func finish(throwing error: CentralError?) {
        let all = consumers.values
        consumers.removeAll()
        for continuation in all { continuation.finish(throwing: error) }
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
