/// A change of a peripheral's connection, as delivered by ``CentralManager/connectionEvents()``.
public enum ConnectionEvent: Sendable, Hashable, CustomStringConvertible {
    /// The link is up (our connect, a reconnection, or a connection adopted at start).
    case connected(Peripheral)
    /// A connection attempt failed (also attempts made by automatic reconnection).
    case failedToConnect(Peripheral, CentralError)
    /// The link went down. The error is nil when this manager asked for it (``CentralManager/disconnect(_:)``),
    /// else says why: ``CentralError/Code/peripheralDisconnected`` (peer, supervision timeout),
    /// ``CentralError/Code/poweredOff`` (adapter off) or ``CentralError/Code/bluezUnavailable``
    /// (bluetoothd went away).
    case disconnected(Peripheral, CentralError?)

    /// The peripheral concerned.
    public var peripheral: Peripheral {
        switch self {
        case .connected(let peripheral), .failedToConnect(let peripheral, _), .disconnected(let peripheral, _):
            peripheral
        }
    }

    public var description: String {
        switch self {
        case .connected(let peripheral): "connected \(peripheral)"
        case .failedToConnect(let peripheral, let error): "failed to connect \(peripheral): \(error)"
        case .disconnected(let peripheral, let error): "disconnected \(peripheral)" + (error.map { ": \($0)" } ?? "")
        }
    }
}
