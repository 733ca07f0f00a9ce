import Bluetooth

/// A question bluetoothd asks the central's pairing agent (`org.bluez.Agent1`) about a device
/// (``CentralManager/startPairingAgent(_:)``): what to enter, show or confirm. Answer it with
/// ``CentralManager/answerPairing(_:_:)``; bluetoothd waits up to 60 s for the answer (its
/// `REQUEST_TIMEOUT`), the peer's SMP timer 30 s.
public struct PairingQuestion: Sendable, Equatable {
    /// Identifies the question in ``CentralManager/answerPairing(_:_:)`` and in a cancellation.
    public let id: Int
    /// The device asked about.
    public let address: BluetoothAddress
    public let method: PairingMethod
    /// The passkey to show or compare (0–999999; show it zero-padded to 6 digits).
    public let passkey: UInt32?
    /// `AuthorizeService`: the service's UUID.
    public let service: String?
    /// Whether this central's own ``CentralManager/pair(_:timeout:)`` of the device is running
    /// (else bluetoothd asks on behalf of someone else: the peer, or another client's Pair with
    /// this agent as the default).
    public let pairingHere: Bool

    public init(
        id: Int, address: BluetoothAddress, method: PairingMethod, passkey: UInt32? = nil, service: String? = nil,
        pairingHere: Bool
    ) {
        self.id = id
        self.address = address
        self.method = method
        self.passkey = passkey
        self.service = service
        self.pairingHere = pairingHere
    }
}

/// What the pairing agent tells its handler.
public enum PairingAgentEvent: Sendable, Equatable {
    /// A new question (a ``PairingMethod/passkeyDisplay`` needs no answer).
    case question(PairingQuestion)
    /// bluetoothd withdrew the question (`Agent1.Cancel`: the pairing ended, or it stopped
    /// waiting); an answer to it now is dropped.
    case cancelled(Int)
}
