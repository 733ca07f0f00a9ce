import Bluetooth

/// The radio view's slots by address (``RadioView``): an open-addressing table of the 48-bit
/// addresses, linear probing, at most half full, instead of a `Dictionary` (SipHash of the
/// address with every report). The hash is a multiplication by a per-process random odd
/// number, so that the addresses a sender chooses cannot be made to collide on purpose.
/// No removal: the view rebuilds it when it evicts. Loop-confined, like the view.
struct AddressIndex {
    /// Address + 1 (0: empty) and slot, per table entry.
    private var keys: [UInt64]
    private var slots: [Int32]
    private(set) var count = 0
    private let multiplier: UInt64

    init() {
        keys = [UInt64](repeating: 0, count: 64)
        slots = [Int32](repeating: 0, count: 64)
        multiplier = UInt64.random(in: 1...UInt64.max) | 1
    }

    @inline(__always)
    private func start(_ key: UInt64, mask: Int) -> Int {
        Int(truncatingIfNeeded: (key &* multiplier) >> 32) & mask
    }

    /// The slot of `address`, if it has one.
    subscript(address: BluetoothAddress) -> Int? {
        let key = address.rawValue &+ 1
        let mask = keys.count - 1
        var position = start(key, mask: mask)
        while true {
            let found = keys[position]
            if found == key { return Int(slots[position]) }
            if found == 0 { return nil }
            position = (position + 1) & mask
        }
    }

    /// Gives `address` the slot `slot` (replacing the one it had).
    mutating func set(_ address: BluetoothAddress, _ slot: Int) {
        if (count + 1) * 2 > keys.count { grow() }
        let key = address.rawValue &+ 1
        let mask = keys.count - 1
        var position = start(key, mask: mask)
        while keys[position] != 0, keys[position] != key { position = (position + 1) & mask }
        if keys[position] == 0 { count += 1 }
        keys[position] = key
        slots[position] = Int32(truncatingIfNeeded: slot)
    }

    /// Empties it (the storage kept).
    mutating func removeAll() {
        guard count > 0 else { return }
        keys.withUnsafeMutableBufferPointer { $0.update(repeating: 0) }
        count = 0
    }

    private mutating func grow() {
        let oldKeys = keys
        let oldSlots = slots
        keys = [UInt64](repeating: 0, count: oldKeys.count * 2)
        slots = [Int32](repeating: 0, count: oldKeys.count * 2)
        let mask = keys.count - 1
        for (key, slot) in zip(oldKeys, oldSlots) where key != 0 {
            var position = start(key, mask: mask)
            while keys[position] != 0 { position = (position + 1) & mask }
            keys[position] = key
            slots[position] = slot
        }
    }
}
