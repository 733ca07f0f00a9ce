import Bluetooth

/// A change of a device's link reported by ``BLEPort/connectionEvents()``.
public enum BLEConnectionEvent: Sendable, Hashable {
    /// The link to `address` ended; `reason` is nil when the gateway asked for it.
    case disconnected(BluetoothAddress, reason: BLEPortError?)
    /// A link is up: one the gateway made, or one it did not — already up when the port
    /// started (another client left it up) or made by another client since. Carries what the
    /// stack remembers of the device (name, service UUIDs) for matching device rules; a
    /// connected peripheral usually stops advertising, so a scan may never report it.
    case connected(BLEDiscovery)
    /// The adapter is usable again: powered on after it was off, or bluetoothd is back after
    /// a restart. Links that ended meanwhile ended through no fault of their devices.
    case adapterReady
}
