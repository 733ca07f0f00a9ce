/// What a pairing agent is asked about a device (bluetoothd's `org.bluez.Agent1` calls): what to
/// enter, show or confirm. Shared by BlueZ's agent (`PairingQuestion`) and the gateway's port
/// (`BLEPairingQuestion`); the raw value is the `method` of the `pairing_request` event
/// (docs/config.md, "Pairing").
public enum PairingMethod: String, Sendable, Equatable {
    /// `RequestPasskey`: the peer shows a passkey; answer with it (``PairingAnswer/passkey(_:)``).
    case passkeyEntry = "passkey_entry"
    /// `DisplayPasskey`: show the passkey for the peer's user to type; no answer is owed
    /// (bluetoothd got its empty reply already).
    case passkeyDisplay = "passkey_display"
    /// `RequestConfirmation`: both sides show the passkey; accept when they agree.
    case numericComparison = "numeric_comparison"
    /// `RequestAuthorization` (a pairing that would otherwise be Just Works) or
    /// `AuthorizeService` (a service's UUID): accept or reject.
    case authorization
}

/// The answer to a pairing question.
public enum PairingAnswer: Sendable, Equatable {
    /// The passkey entered (0–999999), for ``PairingMethod/passkeyEntry``.
    case passkey(UInt32)
    /// Yes: the numbers agree, the pairing or service is authorized.
    case accept
    /// No: `org.bluez.Error.Rejected`.
    case reject
    /// Nobody answered in time: `org.bluez.Error.Canceled`.
    case cancel
}
