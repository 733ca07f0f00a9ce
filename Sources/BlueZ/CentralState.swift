/// The state of a ``CentralManager``, with Core Bluetooth's meanings (`CBManagerState`).
///
/// Derived from three facts: whether `org.bluez` has an owner on the system bus, whether the
/// chosen adapter exists and is `Powered`, and whether the bus let us talk to BlueZ at all.
public enum CentralState: String, Sendable, Hashable, CustomStringConvertible {
    /// Not known yet: the manager has not finished reading BlueZ's objects.
    case unknown
    /// bluetoothd went away (its bus name lost its owner); the manager waits for it to come back
    /// and then restores discovery, connections and subscriptions.
    case resetting
    /// No bluetoothd on the bus (`org.bluez` has no owner) or no matching adapter.
    case unsupported
    /// The bus refused access to BlueZ (`org.freedesktop.DBus.Error.AccessDenied`).
    case unauthorized
    /// The adapter exists and is powered off.
    case poweredOff
    /// The adapter is powered on: scanning and connecting work.
    case poweredOn

    public var description: String { rawValue }
}
