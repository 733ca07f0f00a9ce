import Bluetooth

/// Who may connect now: at most `limit` links (connecting or connected) at a time, the rest
/// waiting in a fair queue — first come, first served, with devices that a command waits for
/// (``request(_:urgent:)`` with `urgent`) ahead of background (re)connects. A device is in the
/// queue at most once. A value type: each call returns the devices to start connecting.
///
/// The budget is shared with another user of the adapter (the Bluetooth proxy's backend, a
/// ``GatewayAttachment``; docs/ha-bluetooth-proxy.md): its links are ``reserve(_:)``d, at once or
/// not at all (it never queues). Each slot taken is one entry, held by the gateway's link, by a
/// reservation, or by both (a device linked by both counts once); a device the gateway asks for
/// while it is reserved shares that entry and starts at once.
struct ConnectionScheduler: Sendable {
    /// One slot taken: a device's link, by whom it is held.
    struct Entry: Sendable, Equatable {
        let address: BluetoothAddress
        /// The gateway's own link (connecting or connected).
        var gateway: Bool
        /// The other user's link (or its attempt).
        var reserved: Bool
    }

    let limit: Int
    /// The slots taken, in the order they were taken.
    private(set) var entries: [Entry] = []
    private var urgent: [BluetoothAddress] = []
    private var background: [BluetoothAddress] = []

    init(limit: Int) { self.limit = max(1, limit) }

    /// Devices waiting for a slot, in the order they will get one.
    var waiting: [BluetoothAddress] { urgent + background }

    /// Devices whose slot the gateway's own link holds.
    var active: [BluetoothAddress] { entries.filter(\.gateway).map(\.address) }
    /// Devices the other user holds a link to (or is making one to).
    var reserved: [BluetoothAddress] { entries.filter(\.reserved).map(\.address) }

    func isActive(_ address: BluetoothAddress) -> Bool { entries.contains { $0.address == address && $0.gateway } }
    func isReserved(_ address: BluetoothAddress) -> Bool { entries.contains { $0.address == address && $0.reserved } }

    /// Slots taken: one per entry, whoever holds it.
    var used: Int { entries.count }

    /// Slots free now (none while devices wait: a free slot is granted at once).
    var free: Int { max(0, limit - used) }

    /// Asks for a slot; returns the devices that may start connecting now.
    mutating func request(_ address: BluetoothAddress, urgent isUrgent: Bool) -> [BluetoothAddress] {
        if let index = entries.firstIndex(where: { $0.address == address }) {
            guard !entries[index].gateway else { return [] }
            // The other user's link to it holds a slot already: shared, no wait.
            urgent.removeAll { $0 == address }
            background.removeAll { $0 == address }
            entries[index].gateway = true
            return [address]
        }
        if isUrgent {
            background.removeAll { $0 == address }
            if !urgent.contains(address) { urgent.append(address) }
        } else if !urgent.contains(address), !background.contains(address) {
            background.append(address)
        }
        return grant()
    }

    /// The device's link ended (or its attempt failed, or it left the queue); returns the
    /// devices that may start connecting now.
    mutating func release(_ address: BluetoothAddress) -> [BluetoothAddress] {
        if let index = entries.firstIndex(where: { $0.address == address && $0.gateway }) {
            entries[index].gateway = false
            if !entries[index].reserved { entries.remove(at: index) }
        }
        urgent.removeAll { $0 == address }
        background.removeAll { $0 == address }
        return grant()
    }

    /// Takes a slot for the other user's link to `address`, at once or not at all: true when a
    /// slot is free, when the gateway's own link to the device holds one (shared), or when it is
    /// reserved already; false when every slot is taken.
    mutating func reserve(_ address: BluetoothAddress) -> Bool {
        if let index = entries.firstIndex(where: { $0.address == address }) {
            entries[index].reserved = true
            return true
        }
        guard used < limit else { return false }
        entries.append(Entry(address: address, gateway: false, reserved: true))
        return true
    }

    /// The other user's link to `address` is over; returns the devices that may start
    /// connecting now (the slot it freed, unless the gateway's own link to it keeps it).
    mutating func unreserve(_ address: BluetoothAddress) -> [BluetoothAddress] {
        guard let index = entries.firstIndex(where: { $0.address == address && $0.reserved }) else { return [] }
        entries[index].reserved = false
        guard !entries[index].gateway else { return [] }
        entries.remove(at: index)
        return grant()
    }

    private mutating func grant() -> [BluetoothAddress] {
        var started: [BluetoothAddress] = []
        while used < limit, let next = urgent.first ?? background.first {
            if urgent.first == next { urgent.removeFirst() } else { background.removeFirst() }
            entries.append(Entry(address: next, gateway: true, reserved: false))
            started.append(next)
        }
        return started
    }
}
