import Bluetooth

/// The devices that matched a rule: identities (address, name, topic, rule), when each was last
/// heard of, and the slots every feature keys its per-device state by (``DeviceID``).
/// `bluetooth.max_devices` bounds it; which device makes room is the gateway's choice
/// (``oldest(where:)``). Loop-confined.
final class DeviceRegistry {
    private var records: [DeviceRecord?] = []
    private var freeSlots: [Int32] = []
    private var slotByAddress: [BluetoothAddress: Int32] = [:]
    /// The devices in registration order (`bridge/devices` lists them so).
    private(set) var order: [DeviceID] = []
    /// The service UUID lists devices advertised, each kept once.
    private(set) var serviceLists = ServiceLists()

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

    /// The first device named `name` (a topic level), in registration order.
    func id(named name: String) -> DeviceID? {
        order.first { self[$0].name == name }
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

    /// The device that was silent longest among those `eligible` says may go; nil when none may.
    func oldest(where eligible: (DeviceID) -> Bool) -> DeviceID? {
        var oldest: DeviceID?
        for id in order where eligible(id) {
            if oldest.map({ self[id].lastActivity < self[$0].lastActivity }) ?? true { oldest = id }
        }
        return oldest
    }
}
