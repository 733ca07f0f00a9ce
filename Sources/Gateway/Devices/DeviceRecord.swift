import Bluetooth
import Parsers

/// Everything the gateway knows about one device that matched a rule.
///
/// What every device needs is stored inline; what only devices the gateway connects to, sends
/// commands to or announces to Home Assistant use lives in ``LinkState``, allocated the first
/// time one of those fields gets a value other than its default. With `max_devices` advertising
/// sensors that keeps each record small (the array holds them inline, so its size is the
/// record's stride times the capacity).
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

    /// The fields of connections, commands and Home Assistant discovery.
    struct LinkState: Sendable {
        /// Made on the first connection failure or success (``Gateway/updateReconnect(_:_:)``).
        var reconnect: (any ReconnectStrategy)?
        var retryAt: Double?
        var gaveUp = false
        var connectStartedAt: Double?
        var characteristics: [BLECharacteristic] = []
        var notificationTasks: [Task<Void, Never>] = []
        var pollDue: [Double] = []
        var idleDisconnectAt: Double?
        var sources: [(attribute: String, poll: Bool, index: Int)] = []
        var lastError: String?
        var everConnected = false
        var discoveryTopics: [String] = []
        var stateHeldUntil: Double?
        var heldStates: [MQTTOutboundMessage] = []
        var commandBucket: TokenBucket?
    }

    /// Holds a ``LinkState`` for copy-on-write: a record copied (`let device = devices[index]`)
    /// keeps its values when the original changes.
    final class LinkBox: @unchecked Sendable {
        // Invariant for @unchecked Sendable: `value` is written only through
        // ``DeviceRecord/linkState``, which first copies the box unless it is uniquely referenced,
        // so a box another record (or task) can see is never written.
        var value: LinkState
        init(_ value: LinkState) { self.value = value }
    }

    // Inline fields, widest first (Swift lays them out in this order): optionals of 8-byte
    // values are stored with a sentinel rather than as `Optional` (which takes 16 bytes).
    let address: BluetoothAddress
    /// The topic level: friendly name, else the address without colons.
    let name: String
    /// `<base>/<name>`, kept (one string per device) rather than made for every state message.
    let stateTopic: String
    var attributes: [Attribute] = []
    /// The advertised service UUIDs, usually a list shared with other devices (``ServiceLists``).
    var services = ServiceList.empty
    var localName: String?
    private var box: LinkBox?
    /// Monotonic time of the last advertisement or GATT value (registration time before that):
    /// advertisement-only devices silent for `bluetooth.forget_after` are forgotten.
    var lastActivity: Double = 0
    private var lastSeenMilliseconds = Int64.min
    var rate = RateControl()
    var availability = AvailabilityTracker()
    private let rule: UInt32
    private var signal = Int16.min
    /// The advertisement format: an ``AttributeTable`` index, 0 for none (``Gateway/format(_:)``).
    var format: UInt16 = 0
    var link: Link = .idle

    var ruleIndex: Int { Int(rule) }
    var rssi: Int? {
        get { signal == .min ? nil : Int(signal) }
        // RSSI comes from an Int8; clamping keeps the sentinel out of reach.
        set { signal = newValue.map { Int16(clamping: max($0, Int(Int16.min) + 1)) } ?? .min }
    }
    var lastSeenWall: Int64? {
        get { lastSeenMilliseconds == .min ? nil : lastSeenMilliseconds }
        set { lastSeenMilliseconds = newValue ?? .min }
    }

    init(address: BluetoothAddress, name: String, stateTopic: String, ruleIndex: Int) {
        self.address = address
        self.name = name
        self.stateTopic = stateTopic
        self.rule = UInt32(ruleIndex)
    }

    /// The connection, command and discovery fields; writing allocates them (once).
    var linkState: LinkState {
        get { box?.value ?? LinkState() }
        _modify {
            if box == nil {
                box = LinkBox(LinkState())
            } else if !isKnownUniquelyReferenced(&box!) {
                box = LinkBox(box!.value)
            }
            yield &box!.value
        }
    }

    /// Writes a link field, unless it is the default and nothing was allocated yet.
    private mutating func set<Value>(_ field: WritableKeyPath<LinkState, Value>, _ value: Value, isDefault: Bool) {
        if box == nil, isDefault { return }
        linkState[keyPath: field] = value
    }

    var reconnect: (any ReconnectStrategy)? {
        get { box?.value.reconnect }
        set { set(\.reconnect, newValue, isDefault: newValue == nil) }
    }
    var retryAt: Double? {
        get { box?.value.retryAt }
        set { set(\.retryAt, newValue, isDefault: newValue == nil) }
    }
    var gaveUp: Bool {
        get { box?.value.gaveUp ?? false }
        set { set(\.gaveUp, newValue, isDefault: !newValue) }
    }
    var connectStartedAt: Double? {
        get { box?.value.connectStartedAt }
        set { set(\.connectStartedAt, newValue, isDefault: newValue == nil) }
    }
    var characteristics: [BLECharacteristic] {
        get { box?.value.characteristics ?? [] }
        set { set(\.characteristics, newValue, isDefault: newValue.isEmpty) }
    }
    var notificationTasks: [Task<Void, Never>] {
        get { box?.value.notificationTasks ?? [] }
        set { set(\.notificationTasks, newValue, isDefault: newValue.isEmpty) }
    }
    var pollDue: [Double] {
        get { box?.value.pollDue ?? [] }
        set { set(\.pollDue, newValue, isDefault: newValue.isEmpty) }
    }
    var idleDisconnectAt: Double? {
        get { box?.value.idleDisconnectAt }
        set { set(\.idleDisconnectAt, newValue, isDefault: newValue == nil) }
    }
    /// Which configured characteristic produced each attribute (for `/get`): `(attribute, poll, index)`.
    var sources: [(attribute: String, poll: Bool, index: Int)] {
        get { box?.value.sources ?? [] }
        set { set(\.sources, newValue, isDefault: newValue.isEmpty) }
    }
    var lastError: String? {
        get { box?.value.lastError }
        set { set(\.lastError, newValue, isDefault: newValue == nil) }
    }
    /// A link was up before (the next successful connect counts as a reconnect).
    var everConnected: Bool {
        get { box?.value.everConnected ?? false }
        set { set(\.everConnected, newValue, isDefault: !newValue) }
    }
    /// Home Assistant discovery config topics published for this device (emptied on removal).
    var discoveryTopics: [String] {
        get { box?.value.discoveryTopics ?? [] }
        set { set(\.discoveryTopics, newValue, isDefault: newValue.isEmpty) }
    }
    /// The state is held until then after new discovery configs (HA drops a state that
    /// arrives within ~0.1 s of a new config); nil: not held.
    var stateHeldUntil: Double? {
        get { box?.value.stateHeldUntil }
        set { set(\.stateHeldUntil, newValue, isDefault: newValue == nil) }
    }
    /// State messages of readings that came during the hold, in order, published when it ends.
    var heldStates: [MQTTOutboundMessage] {
        get { box?.value.heldStates ?? [] }
        set { set(\.heldStates, newValue, isDefault: newValue.isEmpty) }
    }
    /// Commands this device may still take now (`commands.rate_limit`); nil until its first
    /// command (a bucket made then is as full as one made at registration).
    var commandBucket: TokenBucket? {
        get { box?.value.commandBucket }
        set { set(\.commandBucket, newValue, isDefault: newValue == nil) }
    }

    /// The default topic name of an address: upper case without colons (`A4C138000001`).
    static func defaultName(_ address: BluetoothAddress) -> String {
        String(address.description.filter { $0 != ":" })
    }

    /// Merges readings into the state (attributes keep their first-seen order); true when an
    /// attribute is new. New attributes get exactly the room they need: most devices send the
    /// same set every time, so the array never grows again.
    mutating func merge(_ readings: [Reading], table: inout AttributeTable) -> Bool {
        var added = false
        for (position, reading) in readings.enumerated() {
            if let index = attributes.firstIndex(where: { table.name($0.name) == reading.name }) {
                attributes[index].value = reading.value
                // A reading without a unit or class keeps the one known.
                let old = table.info(attributes[index].info)
                let unit = reading.unit ?? old.unit
                let deviceClass = reading.deviceClass ?? old.deviceClass
                if unit != old.unit || deviceClass != old.deviceClass {
                    attributes[index].info = table.infoIndex(unit: unit, deviceClass: deviceClass)
                }
                continue
            }
            guard let name = table.nameIndex(reading.name) else { continue }
            let needed = attributes.count + readings.count - position
            if !added, attributes.capacity < needed {
                // The readings from here on: a bound (one may repeat a known name), usually exact.
                attributes.reserveCapacity(needed)
            }
            added = true
            attributes.append(Attribute(name: name, value: reading.value,
                                        info: table.infoIndex(unit: reading.unit, deviceClass: reading.deviceClass)))
        }
        return added
    }
}
