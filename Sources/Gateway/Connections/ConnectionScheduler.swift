import Bluetooth

/// Who may connect now: at most `limit` links (connecting or connected) at a time, the rest
/// waiting in a fair queue — first come, first served, with devices that a command waits for
/// (``request(_:urgent:)`` with `urgent`) ahead of background (re)connects. A device is in the
/// queue at most once. A value type: each call returns the devices to start connecting.
struct ConnectionScheduler: Sendable {
    let limit: Int
    private(set) var active: [BluetoothAddress] = []
    private var urgent: [BluetoothAddress] = []
    private var background: [BluetoothAddress] = []

    init(limit: Int) { self.limit = max(1, limit) }

    /// Devices waiting for a slot, in the order they will get one.
    var waiting: [BluetoothAddress] { urgent + background }

    func isActive(_ address: BluetoothAddress) -> Bool { active.contains(address) }

    /// Asks for a slot; returns the devices that may start connecting now.
    mutating func request(_ address: BluetoothAddress, urgent isUrgent: Bool) -> [BluetoothAddress] {
        guard !active.contains(address) else { return [] }
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

    private mutating func grant() -> [BluetoothAddress] {
        var started: [BluetoothAddress] = []
        while active.count < limit, let next = urgent.first ?? background.first {
            if urgent.first == next { urgent.removeFirst() } else { background.removeFirst() }
            active.append(next)
            started.append(next)
        }
        return started
    }
}
