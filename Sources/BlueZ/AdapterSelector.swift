import Bluetooth

/// Which local Bluetooth adapter a ``CentralManager`` uses.
public enum AdapterSelector: Sendable, Hashable, CustomStringConvertible {
    /// The first adapter (by object path) with the `central` role, preferring a powered one.
    case first
    /// The adapter with this interface name, e.g. `hci0`.
    case name(String)
    /// The adapter with this controller address.
    case address(BluetoothAddress)

    /// Parses `hci0`-style names and `00:AA:01:00:00:00`-style addresses; nil or empty → ``first``.
    public init(_ text: String?) {
        guard let text, !text.isEmpty else {
            self = .first
            return
        }
        if let address = BluetoothAddress(text) { self = .address(address) } else { self = .name(text) }
    }

    public var description: String {
        switch self {
        case .first: "the first adapter"
        case .name(let name): name
        case .address(let address): "adapter \(address)"
        }
    }
}
