import Bluetooth
import Parsers

/// Everything the gateway knows about one device that matched a rule.
struct DeviceRecord: Sendable {
    enum Link: Sendable, Equatable {
        /// Not connected and not trying.
        case idle
        /// Waiting for a connection slot.
        case queued
        case connecting
        case connected
        /// The gateway asked the port to disconnect.
        case disconnecting
    }

    let address: BluetoothAddress
    /// The topic level: friendly name, else the address without colons.
    let name: String
    let ruleIndex: Int
    /// `<base>/<name>`.
    let stateTopic: String

    var attributes: [Attribute] = []
    var rssi: Int?
    var lastSeenWall: Int64?
    var localName: String?
    var services: [BluetoothUUID] = []
    var format: String?
    var rate: RateControl
    var availability = AvailabilityTracker()

    var link: Link = .idle
    var reconnect: any ReconnectStrategy
    var retryAt: Double?
    var gaveUp = false
    var connectStartedAt: Double?
    var characteristics: [BLECharacteristic] = []
    var notificationTasks: [Task<Void, Never>] = []
    var pollDue: [Double] = []
    var idleDisconnectAt: Double?
    /// Which configured characteristic produced each attribute (for `/get`): `(attribute, poll, index)`.
    var sources: [(attribute: String, poll: Bool, index: Int)] = []
    var lastError: String?
    /// A link was up before (the next successful connect counts as a reconnect).
    var everConnected = false
    /// Monotonic time of the last advertisement or GATT value (registration time before that):
    /// advertisement-only devices silent for `bluetooth.forget_after` are forgotten.
    var lastActivity: Double = 0
    /// Home Assistant discovery config topics published for this device (emptied on removal).
    var discoveryTopics: [String] = []
    /// The state is held until then after new discovery configs (HA drops a state that
    /// arrives within ~0.1 s of a new config); nil: not held.
    var stateHeldUntil: Double?
    /// State messages of readings that came during the hold, in order, published when it ends.
    var heldStates: [MQTTOutboundMessage] = []
    /// Commands this device may still take now (`commands.rate_limit`).
    var commandBucket: TokenBucket?

    init(address: BluetoothAddress, name: String, ruleIndex: Int, stateTopic: String, rate: RateControl,
         reconnect: any ReconnectStrategy) {
        self.address = address
        self.name = name
        self.ruleIndex = ruleIndex
        self.stateTopic = stateTopic
        self.rate = rate
        self.reconnect = reconnect
    }

    /// The default topic name of an address: upper case without colons (`A4C138000001`).
    static func defaultName(_ address: BluetoothAddress) -> String {
        String(address.description.filter { $0 != ":" })
    }

    /// Merges a reading into the state (attributes keep their first-seen order); true when the
    /// attribute is new.
    @discardableResult
    mutating func merge(_ reading: Reading) -> Bool {
        if let index = attributes.firstIndex(where: { $0.name == reading.name }) {
            attributes[index].value = reading.value
            if let unit = reading.unit { attributes[index].unit = unit }
            if let deviceClass = reading.deviceClass { attributes[index].deviceClass = deviceClass }
            return false
        }
        attributes.append(Attribute(name: reading.name, value: reading.value, unit: reading.unit, deviceClass: reading.deviceClass))
        return true
    }
}
