import Bluetooth

/// Who may connect now: at most `limit` links (connecting or connected) at a time, the rest
/// waiting in a fair queue — first come, first served, with devices that a command waits for
/// (``request(_:urgent:)`` with `urgent`) ahead of background (re)connects. A device is in the
/// queue at most once. A value type: each call returns the devices to start connecting.
///
/// The budget is shared with another user of the adapter (the Bluetooth proxy,
/// docs/ha-bluetooth-proxy.md): its links are ``reserve(_:)``d, at once or not at all (it never
/// queues), and take a slot each unless the gateway's own link to the same device holds one
/// already; a device held by both counts once. A device the gateway asks for while it is
/// reserved shares that slot and starts at once.
struct ConnectionScheduler: Sendable {
    let limit: Int
    private(set) var active: [BluetoothAddress] = []
    /// Devices the other user holds a link to (or is making one to).
    private(set) var reserved: [BluetoothAddress] = []
    private var urgent: [BluetoothAddress] = []
    private var background: [BluetoothAddress] = []

    init(limit: Int) { self.limit = max(1, limit) }

    /// Devices waiting for a slot, in the order they will get one.
    var waiting: [BluetoothAddress] { urgent + background }

    func isActive(_ address: BluetoothAddress) -> Bool { active.contains(address) }
    func isReserved(_ address: BluetoothAddress) -> Bool { reserved.contains(address) }

    /// Slots taken: the gateway's links and the reserved ones, a device held by both counted once.
    var used: Int { active.count + reserved.count { !active.contains($0) } }

    /// Slots free now (none while devices wait: a free slot is granted at once).
    var free: Int { max(0, limit - used) }

    /// Asks for a slot; returns the devices that may start connecting now.
    mutating func request(_ address: BluetoothAddress, urgent isUrgent: Bool) -> [BluetoothAddress] {
        guard !active.contains(address) else { return [] }
        if reserved.contains(address) {
            // The other user's link to it holds a slot already: shared, no wait.
            urgent.removeAll { $0 == address }
            background.removeAll { $0 == address }
            active.append(address)
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
        active.removeAll { $0 == address }
        urgent.removeAll { $0 == address }
        background.removeAll { $0 == address }
        return grant()
    }

    /// Takes a slot for the other user's link to `address`, at once or not at all: true when a
    /// slot is free, when the gateway's own link to the device holds one (shared), or when it is
    /// reserved already; false when every slot is taken.
    mutating func reserve(_ address: BluetoothAddress) -> Bool {
        guard !reserved.contains(address) else { return true }
        guard active.contains(address) || used < limit else { return false }
        reserved.append(address)
        return true
    }

    /// The other user's link to `address` is over; returns the devices that may start
    /// connecting now (the slot it freed, unless the gateway's own link to it keeps it).
    mutating func unreserve(_ address: BluetoothAddress) -> [BluetoothAddress] {
        guard let index = reserved.firstIndex(of: address) else { return [] }
        reserved.remove(at: index)
        return grant()
    }

    private mutating func grant() -> [BluetoothAddress] {
        var started: [BluetoothAddress] = []
        while used < limit, let next = urgent.first ?? background.first {
            if urgent.first == next { urgent.removeFirst() } else { background.removeFirst() }
            active.append(next)
            started.append(next)
        }
        return started
    }
}
