/// Distinct values, each stored once, by 16-bit index: at most `capacity` of them (65,536 unless
/// the table is made smaller).
struct Interned<Value: Hashable & Sendable>: Sendable {
    private(set) var values: [Value] = []
    private var indexes: [Value: UInt16] = [:]
    let capacity: Int

    init(capacity: Int = 1 << 16) {
        self.capacity = min(capacity, 1 << 16)
    }

    /// A table whose index 0 is `first`, a placeholder that ``index(of:)`` never hands out.
    init(first: Value) {
        self.init()
        values = [first]
    }

    /// The index of `value`, stored if new; nil when the table is full.
    mutating func index(of value: Value) -> UInt16? {
        if let index = indexes[value] { return index }
        guard values.count < capacity, let index = UInt16(exactly: values.count) else { return nil }
        values.append(value)
        indexes[value] = index
        return index
    }
}
