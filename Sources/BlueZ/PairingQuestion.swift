import Bluetooth

/// A question bluetoothd asks the central's pairing agent (`org.bluez.Agent1`) about a device
/// (``CentralManager/startPairingAgent(_:)``): what to enter, show or confirm. Answer it with
/// ``CentralManager/answerPairing(_:_:)``; bluetoothd waits up to 60 s for the answer (its
/// `REQUEST_TIMEOUT`), the peer's SMP timer 30 s.
public struct PairingQuestion: Sendable, Equatable {
    /// What bluetoothd asks.
    public enum Method: String, Sendable, Equatable {
        /// `RequestPasskey`: the peer shows a passkey; answer with it (``PairingAnswer/passkey(_:)``).
        case passkeyEntry = "passkey_entry"
        /// `DisplayPasskey`: show ``PairingQuestion/passkey`` for the peer's user to type; no
        /// answer is owed (bluetoothd got its empty reply already).
        case passkeyDisplay = "passkey_display"
        /// `RequestConfirmation`: both sides show ``PairingQuestion/passkey``; accept when they agree.
        case numericComparison = "numeric_comparison"
        /// `RequestAuthorization` (a pairing that would otherwise be Just Works) or
        /// `AuthorizeService` (``PairingQuestion/service``): accept or reject.
        case authorization
    }

    /// Identifies the question in ``CentralManager/answerPairing(_:_:)`` and in a cancellation.
    public let id: Int
    /// The device asked about.
    public let address: BluetoothAddress
    public let method: Method
    /// The passkey to show or compare (0–999999; show it zero-padded to 6 digits).
    public let passkey: UInt32?
    /// `AuthorizeService`: the service's UUID.
    public let service: String?
    /// Whether this central's own ``CentralManager/pair(_:timeout:)`` of the device is running
    /// (else bluetoothd asks on behalf of someone else: the peer, or another client's Pair with
    /// this agent as the default).
    public let pairingHere: Bool

    public init(
        id: Int, address: BluetoothAddress, method: Method, passkey: UInt32? = nil, service: String? = nil,
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

/// The answer to a ``PairingQuestion``.
public enum PairingAnswer: Sendable, Equatable {
    /// The passkey entered (0–999999), for ``PairingQuestion/Method/passkeyEntry``.
    case passkey(UInt32)
    /// Yes: the numbers agree, the pairing or service is authorized.
    case accept
    /// No: `org.bluez.Error.Rejected`.
    case reject
    /// Nobody answered in time: `org.bluez.Error.Canceled`.
    case cancel
}

/// What the pairing agent tells its handler.
public enum PairingAgentEvent: Sendable, Equatable {
    /// A new question (a ``PairingQuestion/Method/passkeyDisplay`` needs no answer).
    case question(PairingQuestion)
    /// bluetoothd withdrew the question (`Agent1.Cancel`: the pairing ended, or it stopped
    /// waiting); an answer to it now is dropped.
    case cancelled(Int)
}
