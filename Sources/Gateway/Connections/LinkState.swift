import Bluetooth

/// One device's link, as the connection manager sees it.
struct LinkState {
    enum Phase: Sendable, Equatable {
        /// Not connected and not trying.
        case idle
        /// Waiting for a connection slot.
        case queued
        case connecting
        case connected
        /// The gateway asked the port to disconnect.
        case disconnecting
    }

    /// The device's rule (its `subscribe` and `poll` entries).
    let ruleIndex: Int
    var phase: Phase = .idle
    /// Made on the first connection failure or success.
    var reconnect: (any ReconnectStrategy)?
    var retryAt: Double?
    var gaveUp = false
    var characteristics: [BLECharacteristic] = []
    var subscriptions: [PortRegistration] = []
    /// When each `poll` entry is read next (infinity while not connected).
    var pollDue: [Double] = []
    /// An on-demand link (rule without `connect`) ends then when no command uses it.
    var idleDisconnectAt: Double?
    /// A link was up before (the next successful connect counts as a reconnect).
    var everConnected = false
    /// Connection attempts that failed in a row while the device never had a link and kept
    /// advertising (a device that went silent meanwhile is away, not refusing: the count restarts).
    var failuresWithoutLink = 0
    /// The device was heard advertising since the last failed attempt (it was heard before the
    /// first one: that is how it was found).
    var heardSinceFailure = true
    /// Parked: it never accepted a connection in `bluetooth.park_after` attempts; tried again
    /// only every `bluetooth.parked_retry` (a command still connects on demand).
    var parked = false

    init(ruleIndex: Int, polls: Int) {
        self.ruleIndex = ruleIndex
        pollDue = Array(repeating: .infinity, count: polls)
    }
}

/// What a connect job established: the characteristics, the notification subscriptions made,
/// the subscribed characteristics that can only be read (read once per connection instead),
/// and what went wrong on the way (logged).
struct EstablishedLink: Sendable {
    var characteristics: [BLECharacteristic]
    var subscriptions: [PortRegistration]
    var readOnce: [CharacteristicRef]
    var warnings: [String]
    /// The rule's `connection_params`, when the port loaded them before the connect.
    var parameters: ConnectionParameters? = nil
}
