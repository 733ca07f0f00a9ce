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

    /// Merges readings into the state (attributes keep their first-seen order).
    mutating func merge(_ name: String, _ value: ReadingValue) {
        if let index = attributes.firstIndex(where: { $0.name == name }) {
            attributes[index].value = value
        } else {
            attributes.append(Attribute(name: name, value: value))
        }
    }
}
