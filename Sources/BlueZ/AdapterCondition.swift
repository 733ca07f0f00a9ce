/// Why the chosen adapter can or cannot be used, told apart more finely than ``CentralState``
/// (whose meanings are Core Bluetooth's): what an operator has to do differs for each.
public enum AdapterCondition: String, Sendable, Hashable, CustomStringConvertible {
    /// Not known yet: the manager has not finished reading BlueZ's objects.
    case unknown
    /// Powered on: scanning and connecting work.
    case poweredOn = "powered_on"
    /// The adapter exists and is powered off.
    case poweredOff = "powered_off"
    /// The adapter is powered off because its radio is blocked by rfkill: BlueZ's `PowerState`
    /// says `off-blocked` (BlueZ 5.66 exports it with `Experimental = true`, later versions always).
    case rfkillBlocked = "rfkill_blocked"
    /// bluetoothd runs but has no adapter matching the selector.
    case missing
    /// The bus refuses this process access to `org.bluez` (`AccessDenied`): the D-Bus policy.
    case accessDenied = "access_denied"
    /// bluetoothd is not on the bus (`org.bluez` has no owner), or went away and is awaited.
    case bluetoothdGone = "bluetoothd_gone"

    public var description: String { rawValue }

    /// The condition implied by a manager's state, whether bluetoothd owns `org.bluez`, and the
    /// adapter's `PowerState` (nil when BlueZ does not export it).
    static func of(_ state: CentralState, bluezPresent: Bool, powerState: String?) -> AdapterCondition {
        switch state {
        case .unknown: .unknown
        case .poweredOn: .poweredOn
        case .poweredOff: powerState == "off-blocked" ? .rfkillBlocked : .poweredOff
        case .unauthorized: .accessDenied
        case .unsupported: bluezPresent ? .missing : .bluetoothdGone
        case .resetting: .bluetoothdGone
        }
    }
}
