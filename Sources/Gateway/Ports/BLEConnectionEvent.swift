import Bluetooth

/// A change of a device's link reported by ``BLEPort/connectionEvents()``.
public enum BLEConnectionEvent: Sendable, Hashable {
    /// The link to `address` ended; `reason` is nil when the gateway asked for it.
    case disconnected(BluetoothAddress, reason: BLEPortError?)
}
