#if canImport(Glibc)
    import Glibc
#endif

/// The strings of recently received signals, reused when the same bytes come again.
///
/// A Swift string of more than 15 UTF-8 bytes lives in a heap allocation, and a signal repeats
/// most of its long strings every time: BlueZ's `PropertiesChanged` of a device carries its
/// path (`/org/bluez/hci0/dev_A4_C1_38_5A_00_00`), `org.freedesktop.DBus.Properties`,
/// `PropertiesChanged`, `org.bluez.Device1` and a service data key such as
/// `0000181a-0000-1000-8000-00805f9b34fb`. Finding one here costs a hash of three words and a
/// comparison, where a new one costs an allocation, a copy and later a release and a free.
///
/// Direct-mapped: a string goes to one slot by a hash of its length and three of its words,
/// replacing what was there. A bounded memory (``slotCount`` strings) and no eviction logic;
/// with more devices than slots paths miss more often, and a miss costs what decoding cost
/// before plus the hash. Confined to its connection's loop thread (not `Sendable`).
package final class StringCache {
    static let slotCount = 256
    /// The slots, in memory of their own rather than an array property: a class's stored `var`
    /// is accessed with a dynamic exclusivity check each time (`swift_beginAccess`).
    private let slots: UnsafeMutablePointer<String?>

    package init() {
        slots = .allocate(capacity: Self.slotCount)
        slots.initialize(repeating: nil, count: Self.slotCount)
    }

    deinit {
        slots.deinitialize(count: Self.slotCount)
        slots.deallocate()
    }

    /// The string of the `count` UTF-8 bytes at `bytes` (valid UTF-8: libdbus validated it).
    func string(_ bytes: UnsafePointer<CChar>, count: Int) -> String {
        let buffer = UnsafeRawBufferPointer(start: bytes, count: count)
        // A short string is stored inline, without an allocation: nothing to save.
        guard count > 15 else { return String(decoding: buffer, as: UTF8.self) }
        func mix(_ hash: UInt64, _ offset: Int) -> UInt64 {
            (hash ^ buffer.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) &* 0x9E37_79B9_7F4A_7C15
        }
        let hash = mix(mix(mix(UInt64(truncatingIfNeeded: count), 0), count / 2 - 4), count - 8)
        let slot = Int(truncatingIfNeeded: hash >> 56) & (Self.slotCount - 1)
        if let cached = slots[slot], cached.utf8.count == count,
            cached.utf8.withContiguousStorageIfAvailable({ memcmp($0.baseAddress!, bytes, count) == 0 }) == true
        {
            return cached
        }
        let fresh = String(decoding: buffer, as: UTF8.self)
        slots[slot] = fresh
        return fresh
    }

    /// The string at `pointer` (NUL-terminated).
    func string(_ pointer: UnsafePointer<CChar>) -> String {
        string(pointer, count: strlen(pointer))
    }
}
