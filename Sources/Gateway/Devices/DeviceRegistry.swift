import Bluetooth

/// The devices that matched a rule: identities (address, name, topic, rule), when each was last
/// heard of, and the slots every feature keys its per-device state by (``DeviceID``); which rule
/// a device matches and what a name or address in a command names; eviction —
/// `bluetooth.max_devices` bounds the registry, `bluetooth.forget_after` forgets silent
/// advertisement-only devices. Removing a device is the gateway's: every feature hears of it.
/// Loop-confined.
final class DeviceRegistry {
    /// A device a request names, registered or not (``named(_:)``).
    struct Named {
        var address: BluetoothAddress
        var name: String
        /// The rule it matched, else the rule that names its address (nil: none knows it yet).
        var ruleIndex: Int?
        var id: DeviceID?
    }

    /// What registering one more device takes (``room()``).
    enum Room {
        case free
        /// The device to forget first.
        case forget(DeviceID)
        /// None: the registry is full of devices that stay.
        case full
    }

    private let context: CoreContext
    private var records: [DeviceRecord?] = []
    private var freeSlots: [Int32] = []
    private var slotByAddress: [BluetoothAddress: Int32] = [:]
    /// The devices in registration order (`bridge/devices` lists them so).
    private(set) var order: [DeviceID] = []
    /// The service UUID lists devices advertised, each kept once.
    private(set) var serviceLists = ServiceLists()

    init(context: CoreContext) {
        self.context = context
    }

    /// Number of devices.
    var count: Int { order.count }

    /// One past the highest slot in use: features size their per-device arrays by it.
    var slotCount: Int { records.count }

    /// The device with `address`, if registered.
    func id(_ address: BluetoothAddress) -> DeviceID? {
        slotByAddress[address].map(DeviceID.init(slot:))
    }

    /// The record of a registered device.
    subscript(id: DeviceID) -> DeviceRecord {
        // A DeviceID comes only from this registry and is dropped with its device.
        records[id.index]!
    }

    /// The name of the device in `slot`, nil when the slot is free.
    func name(slot: Int) -> String? { records.indices.contains(slot) ? records[slot]?.name : nil }

    /// The rule of config.json the device matched.
    func rule(_ id: DeviceID) -> DeviceRule { context.rule(self[id].ruleIndex) }

    // MARK: Names

    /// The first device named `name` (a topic level), in registration order.
    func id(named name: String) -> DeviceID? {
        order.first { self[$0].name == name }
    }

    /// A registered device by name or address.
    func id(nameOrAddress text: String) -> DeviceID? {
        id(named: text) ?? BluetoothAddress(text).flatMap { id($0) }
    }

    /// The first rule an advertisement report matches (its index in `devices`).
    func ruleIndex(matching discovery: BLEDiscovery) -> Int? {
        context.config.devices.firstIndex { $0.match.matches(discovery.address, discovery.advertisement) }
    }

    /// The address and rule of a device not registered yet that a topic level names: a rule
    /// with exactly one address, by its friendly name or (without one) the address's default
    /// name.
    func rule(naming name: String) -> (address: BluetoothAddress, ruleIndex: Int)? {
        for (ruleIndex, rule) in context.config.devices.enumerated() {
            guard rule.match.addresses.count == 1, let address = rule.match.addresses.first else { continue }
            if rule.name == name || (rule.name == nil && DeviceRecord.defaultName(address) == name) {
                return (address, ruleIndex)
            }
        }
        return nil
    }

    /// The device a request names, without registering it: a registered device (by name or
    /// address), a rule's friendly name (a rule with one address), or an address a rule may
    /// match (a device not seen yet); nil when `text` is none of these.
    func named(_ text: String) -> Named? {
        let rules = context.config.devices
        if let id = id(nameOrAddress: text) {
            let device = self[id]
            return Named(address: device.address, name: device.name, ruleIndex: device.ruleIndex, id: id)
        }
        if let index = rules.firstIndex(where: { $0.name == text && $0.match.addresses.count == 1 }),
            let address = rules[index].match.addresses.first
        {
            return Named(address: address, name: text, ruleIndex: index)
        }
        guard let address = BluetoothAddress(text), rules.contains(where: { $0.match.mayMatch(address) }) else {
            return nil
        }
        return Named(
            address: address, name: DeviceRecord.defaultName(address),
            ruleIndex: rules.firstIndex { $0.match.addresses.contains(address) })
    }

    /// Registers a device; the caller checked it is not registered.
    func add(
        _ address: BluetoothAddress, name: String, stateTopic: String, ruleIndex: Int, now: Double,
        advertisement: AdvertisementData? = nil
    ) -> DeviceID {
        var record = DeviceRecord(address: address, name: name, stateTopic: stateTopic, ruleIndex: ruleIndex)
        if let advertisement {
            record.rssi = advertisement.rssi.map(Int.init)
            record.localName = advertisement.localName
            record.services = serviceLists.store(advertisement.serviceUUIDs)
        }
        record.lastActivity = now
        let slot: Int32
        if let free = freeSlots.popLast() {
            slot = free
            records[Int(slot)] = record
        } else {
            slot = Int32(records.count)
            records.append(record)
        }
        slotByAddress[address] = slot
        let id = DeviceID(slot: slot)
        order.append(id)
        return id
    }

    /// Forgets a device; its slot goes to a later one.
    func remove(_ id: DeviceID) {
        guard let record = records[id.index] else { return }
        records[id.index] = nil
        slotByAddress[record.address] = nil
        if let position = order.firstIndex(of: id) { order.remove(at: position) }
        freeSlots.append(id.slot)
    }

    /// An advertisement report of the device at `now` (`wall`: milliseconds since 1970).
    func sighted(_ id: DeviceID, _ advertisement: AdvertisementData, now: Double, wall: Int64) {
        var merged: ServiceList?
        if !advertisement.serviceUUIDs.isEmpty, let current = records[id.index]?.services {
            merged = serviceLists.adding(advertisement.serviceUUIDs, to: current)
        }
        Self.update(&records[id.index]) { record in
            record.lastSeenWall = wall
            record.lastActivity = now
            if let rssi = advertisement.rssi { record.rssi = Int(rssi) }
            if let name = advertisement.localName, record.localName != name { record.localName = name }
            if let merged { record.services = merged }
        }
    }

    /// A GATT value of the device arrived at `now`.
    func heard(_ id: DeviceID, now: Double, wall: Int64) {
        Self.update(&records[id.index]) { record in
            record.lastSeenWall = wall
            record.lastActivity = now
        }
    }

    private static func update(_ slot: inout DeviceRecord?, _ body: (inout DeviceRecord) -> Void) {
        guard var record = slot.take() else { return }
        body(&record)
        slot = record
    }

    /// The service UUIDs the device advertised.
    func services(_ id: DeviceID) -> [BluetoothUUID] {
        serviceLists.list(self[id].services)
    }

    // MARK: Eviction

    // `busy` (the gateway's answer, from the connections and the commands): whether a device has
    // a link (or one in the making) or a command queued or running — it is not forgotten then.

    /// Whether the device may be forgotten when silent: advertisement-only, not named by a rule
    /// with exactly one address, and not busy.
    private func isForgettable(_ id: DeviceID, busy: (BluetoothAddress) -> Bool) -> Bool {
        let rule = rule(id)
        return !rule.connect && rule.match.addresses.count != 1 && !busy(self[id].address)
    }

    /// When a forgettable device will be forgotten if nothing arrives.
    func forgetDeadline(_ id: DeviceID, busy: (BluetoothAddress) -> Bool) -> Double? {
        isForgettable(id, busy: busy) ? self[id].lastActivity + context.config.bluetooth.forgetAfter : nil
    }

    /// The advertisement-only devices silent for `bluetooth.forget_after` at `now`, the last
    /// registered first (each logged): the gateway removes them.
    func silent(now: Double, busy: (BluetoothAddress) -> Bool) -> [DeviceID] {
        order.reversed().filter { id in
            guard let deadline = forgetDeadline(id, busy: busy), now >= deadline else { return false }
            context.log(
                .info,
                "\(self[id].name) (\(self[id].address)): forgotten after \(context.config.bluetooth.forgetAfter)s without an advertisement"
            )
            return true
        }
    }

    /// Room for one more device: free below `bluetooth.max_devices`; else the longest-silent
    /// forgettable device is to go first (logged), or, when the registry is full of devices that
    /// stay, none (warned about now and then). Both count in `dropped.registry_full`.
    func room(for address: BluetoothAddress, busy: (BluetoothAddress) -> Bool) -> Room {
        let maxDevices = context.config.bluetooth.maxDevices
        guard count >= maxDevices else { return .free }
        context.counters.dropped.registryFull += 1
        var oldest: DeviceID?
        for id in order where isForgettable(id, busy: busy) {
            if oldest.map({ self[id].lastActivity < self[$0].lastActivity }) ?? true { oldest = id }
        }
        if let oldest {
            context.log(.info, "\(self[oldest].name): forgotten to make room (bluetooth.max_devices \(maxDevices))")
            return .forget(oldest)
        }
        let full = context.counters.dropped.registryFull
        if full == 1 || full % 1000 == 0 {
            context.log(
                .warning,
                "device registry full (bluetooth.max_devices \(maxDevices)): \(address) not tracked; \(full) dropped so far"
            )
        }
        return .full
    }
}
