import BlueZ
import Gateway
import LocalSystem

#if canImport(Glibc)
    import Glibc
#endif

/// What each condition of the adapter means and what to do about it, worded once for both
/// `gattway doctor` (its bluez, access and adapter checks) and `gattway run` (its log,
/// `bridge/event` `adapter_state`, `bridge/health` `adapter` and systemd's `STATUS=`).
public enum AdapterAdvice {
    /// The condition, with an rfkill block told apart where BlueZ does not say it: BlueZ 5.66
    /// exports `PowerState` ("off-blocked") only with `Experimental = true`, so a powered-off
    /// adapter while /sys/class/rfkill says a Bluetooth radio is blocked counts as blocked.
    public static func refined(_ condition: AdapterCondition) -> AdapterCondition {
        condition == .poweredOff && rfkillBlocked() ? .rfkillBlocked : condition
    }

    /// What was found and what to do (empty when nothing needs doing).
    /// - Parameters:
    ///   - label: the adapter, e.g. `hci0 (00:AA:01:00:00:00)`.
    ///   - selector: what the configuration asks for (`bluetooth.adapter`).
    ///   - present: the adapters bluetoothd has, e.g. `hci1 (powered off)`.
    public static func advice(_ condition: AdapterCondition, label: String, selector: String, present: [String]) -> (
        found: String, fix: String
    ) {
        switch condition {
        case .poweredOn: ("\(label) is powered on", "")
        case .poweredOff:
            (
                "\(label) is powered off",
                "bluetoothctl power on (to keep it on across reboots: AutoEnable=true in /etc/bluetooth/main.conf)"
            )
        case .rfkillBlocked:
            (
                "\(label) is powered off",
                "Bluetooth is blocked by rfkill: sudo rfkill unblock bluetooth, then bluetoothctl power on"
            )
        case .missing:
            present.isEmpty
                ? (
                    "bluetoothd reports no Bluetooth adapter",
                    "check the hardware: btmgmt info; rfkill list; dmesg | grep -i bluetooth"
                )
                : (
                    "no adapter matches \"\(selector)\"; present: \(present.joined(separator: ", "))",
                    "set bluetooth.adapter in the config to one of them"
                )
        case .accessDenied:
            (
                "AccessDenied talking to org.bluez as \(userName)",
                "run as a user in the bluetooth group or install deploy/gattway-dbus.conf to /etc/dbus-1/system.d/ (sudo deploy/install.sh does)"
            )
        case .bluetoothdGone:
            (
                "org.bluez is not on the system bus",
                "is bluetoothd running? sudo systemctl start bluetooth (sudo apt install bluez if it is missing)"
            )
        case .unknown: ("the state of \(label) is not known yet", "")
        }
    }

    /// `hci1 (powered off)`: an adapter as ``advice(_:label:selector:present:)`` lists it.
    public static func present(_ name: String, powered: Bool) -> String {
        name + (powered ? "" : " (powered off)")
    }

    /// The central's adapter condition as the gateway core reports it (``BLEAdapterStatus``).
    public static func status(_ condition: AdapterCondition, of central: isolated CentralManager) -> BLEAdapterStatus {
        let condition = refined(condition)
        let name = central.adapterName
        let label = central.adapterAddress.map { "\(name) (\($0))" } ?? name
        let (found, fix) = advice(
            condition, label: label, selector: "\(central.options.adapter)",
            present: central.adapters.map { present($0.name, powered: $0.powered) })
        return BLEAdapterStatus(
            adapter: name, state: condition.rawValue, usable: condition == .poweredOn, message: found,
            fix: fix.isEmpty ? nil : fix)
    }

    /// True when a Bluetooth radio is soft- or hard-blocked (/sys/class/rfkill).
    public static func rfkillBlocked() -> Bool {
        let base = "/sys/class/rfkill"
        guard let entries = LocalFile.contentsOfDirectory(base) else { return false }
        return entries.contains { entry in
            func read(_ name: String) -> String {
                (LocalFile.readText("\(base)/\(entry)/\(name)") ?? "").filter { !$0.isWhitespace }
            }
            return read("type") == "bluetooth" && (read("soft") == "1" || read("hard") == "1")
        }
    }

    /// The effective user's name, for messages.
    public static var userName: String {
        guard let entry = getpwuid(geteuid()) else { return "uid \(geteuid())" }
        return String(cString: entry.pointee.pw_name)
    }
}
