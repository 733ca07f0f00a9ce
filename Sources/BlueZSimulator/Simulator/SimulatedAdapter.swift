import Bluetooth
import DBus

/// One local controller's live state. Owned by ``BlueZSimulator``; loop thread only.
/// Invariant behind `@unchecked Sendable`: confined to the loop thread — only the
/// ``BlueZSimulator`` actor (whose executor is that loop) and the timer and watch handlers it
/// registers on the same loop touch it; it is captured by those closures, never used elsewhere.
final class SimulatedAdapter: @unchecked Sendable {
    let spec: AdapterSpec
    let path: DBusObjectPath
    var powered: Bool
    /// The adapter's object is on the bus (false: unplugged, ``BlueZSimulator/setPresent(adapter:_:)``).
    var present: Bool
    /// The radio is blocked by rfkill, and whether it was powered when it was blocked.
    var blocked: Bool
    var poweredBeforeBlock: Bool
    var sessions = DiscoverySessions()
    /// `StartDiscovery` calls still to refuse with InProgress (the `start_discovery_failures` knob).
    var startDiscoveryFailuresLeft: Int
    /// GATT applications registered here (GattManager1), in registration order; an entry exists
    /// from the call on (so a second call is AlreadyExists), `tree` once it was read.
    var applications: [RegisteredApplication] = []
    /// The next free handle of the local GATT database (after bluetoothd's own services).
    var nextHandle: UInt16
    /// Advertisements registered here (LEAdvertisingManager1), in registration order.
    var advertisements: [RegisteredAdvertisement] = []

    init(spec: AdapterSpec) throws {
        self.spec = spec
        powered = spec.powered && !spec.rfkillBlocked
        present = spec.present
        blocked = spec.rfkillBlocked
        poweredBeforeBlock = spec.powered
        startDiscoveryFailuresLeft = spec.startDiscoveryFailures
        nextHandle = GATTLayout.bluezLocal(name: spec.alias).nextFreeHandle
        path = try DBusObjectPath("/org/bluez").appending(spec.name)
    }

    /// `Adapter1.PowerState`: `on`, `off` or `off-blocked`.
    var powerState: String { blocked ? "off-blocked" : powered ? "on" : "off" }
}
