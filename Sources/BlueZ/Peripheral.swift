import Bluetooth

/// A remote LE device as BlueZ knows it (`org.bluez.Device1`): a plain value, a snapshot taken
/// when it was handed out. Identity is the address: two snapshots of the same device are equal
/// when their ``address`` is (names and flags may change between snapshots).
///
/// Use it with the ``CentralManager`` that produced it: `connect`, `discoverServices`, and so on.
public struct Peripheral: Sendable, Hashable, CustomStringConvertible {
    /// The device address (the identity).
    public var address: BluetoothAddress
    /// `public` or `random`, when BlueZ reported it.
    public var addressType: BluetoothAddress.AddressType?
    /// `Name` (the advertised or GAP name), else nil. Note: after connecting BlueZ may replace the
    /// advertised name with the device's GAP Device Name.
    public var name: String?
    /// Whether the link was up when the snapshot was taken.
    public var isConnected: Bool
    /// Whether BlueZ has resolved (or loaded from cache) the GATT services.
    public var servicesResolved: Bool

    public init(
        address: BluetoothAddress, addressType: BluetoothAddress.AddressType? = nil, name: String? = nil,
        isConnected: Bool = false, servicesResolved: Bool = false
    ) {
        self.address = address
        self.addressType = addressType
        self.name = name
        self.isConnected = isConnected
        self.servicesResolved = servicesResolved
    }

    public static func == (lhs: Peripheral, rhs: Peripheral) -> Bool { lhs.address == rhs.address }
    public func hash(into hasher: inout Hasher) { hasher.combine(address) }

    public var description: String { name.map { "\(address) (\($0))" } ?? address.description }
}
