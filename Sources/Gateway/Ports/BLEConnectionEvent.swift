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
    /// The adapter's condition, once when the port starts and then at each change: powered on,
    /// or why it cannot be used and what to do about it (``BLEAdapterStatus``).
    case adapter(BLEAdapterStatus)
}

/// Whether the adapter can be used and, when not, why and what to do: the gateway logs each
/// change once and reports it on `bridge/event` and in `bridge/health` (docs/operations.md,
/// "The adapter").
public struct BLEAdapterStatus: Sendable, Hashable {
    /// The adapter's name (`hci0`), or what the configuration asked for when there is none.
    public var adapter: String
    /// `powered_on`, `powered_off`, `rfkill_blocked`, `missing`, `access_denied` or `bluetoothd_gone`.
    public var state: String
    /// Scanning and connecting work (`powered_on`).
    public var usable: Bool
    /// What was found, e.g. `hci0 (00:AA:01:00:00:00) is powered off`.
    public var message: String
    /// What to do about it; nil when nothing needs doing.
    public var fix: String?

    public init(adapter: String, state: String, usable: Bool, message: String, fix: String? = nil) {
        self.adapter = adapter
        self.state = state
        self.usable = usable
        self.message = message
        self.fix = fix
    }

    /// `hci0 is powered off — bluetoothctl power on`, the message with what to do.
    public var text: String { message + (fix.map { " — " + $0 } ?? "") }
}
