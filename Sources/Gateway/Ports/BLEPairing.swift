import Bluetooth

/// A question of the central's pairing agent about a device (docs/config.md, "Pairing"): a
/// passkey to enter, show or compare, or an authorization. The port made ``answer``; the gateway
/// calls it at most once, on its loop.
public struct BLEPairingQuestion: Sendable {
    /// Unique among the port's questions (``BLEPairingEvent/cancelled(_:)`` names it).
    public let id: Int
    public let address: BluetoothAddress
    /// What is asked; its raw value is the `method` of the `pairing_request` event.
    public let method: PairingMethod
    /// The passkey to show or compare (0–999999).
    public let passkey: UInt32?
    /// The service UUID of a service authorization.
    public let service: String?
    /// Whether a pairing of this process (a `pair` of the port: the gateway's own or the
    /// Bluetooth proxy's) is what asks.
    public let pairingHere: Bool
    /// Answers the question (nothing happens when it was withdrawn meanwhile).
    public let answer: @Sendable (PairingAnswer) -> Void

    public init(
        id: Int, address: BluetoothAddress, method: PairingMethod, passkey: UInt32? = nil, service: String? = nil,
        pairingHere: Bool, answer: @escaping @Sendable (PairingAnswer) -> Void
    ) {
        self.id = id
        self.address = address
        self.method = method
        self.passkey = passkey
        self.service = service
        self.pairingHere = pairingHere
        self.answer = answer
    }
}

/// What the pairing agent delivers.
public enum BLEPairingEvent: Sendable {
    case question(BLEPairingQuestion)
    /// bluetoothd withdrew question `id` (the pairing ended or stopped waiting).
    case cancelled(Int)
}
