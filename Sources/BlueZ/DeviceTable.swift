import Bluetooth
import DBus

#if canImport(Glibc)
    import Glibc
#endif

/// The `org.bluez.Device1` objects of a ``BlueZObjectTree``, by path, without a path string per
/// device.
///
/// BlueZ names a device `<adapter>/dev_XX_XX_XX_XX_XX_XX` (the address, upper case). Such a path
/// is keyed by its directory — an index into ``prefixes``, in practice one entry per adapter —
/// and the 48-bit address of its last element, packed in a `UInt64`; the path is rebuilt from
/// the key when a list of paths is asked for. Any other path (BlueZ has never used one, but the
/// table does not depend on that) is kept under its own string.
struct DeviceTable {
    /// A device's key: compact for BlueZ's usual path form, else the path.
    enum Key: Hashable {
        case compact(UInt64)
        case path(DBusObjectPath)
    }

    /// Directories (`/org/bluez/hci0/`, with the final slash) of compact keys, by index. Only
    /// ever appended to, so a key stays valid (also in ``ScanSubscription/lastContent``) across
    /// ``removeAll()``.
    private var prefixes: [String] = []
    private var compact: [UInt64: DeviceObject] = [:]
    private var other: [DBusObjectPath: DeviceObject] = [:]

    static let maximumPrefixes = 0xFFFF

    var count: Int { compact.count + other.count }

    mutating func removeAll() {
        compact.removeAll()
        other.removeAll()
    }

    /// The key of an existing device's `path` (for lookups: a compact-form path under a
    /// directory never registered is keyed by its string, and no device has that key).
    func key(_ path: DBusObjectPath) -> Key {
        guard let (address, prefixLength) = Self.parse(path), let index = prefixIndex(path, length: prefixLength) else {
            return .path(path)
        }
        return .compact(UInt64(index) << 48 | address)
    }

    /// The key for `path`, registering its directory.
    private mutating func insertionKey(_ path: DBusObjectPath) -> Key {
        guard let (address, prefixLength) = Self.parse(path) else { return .path(path) }
        if let index = prefixIndex(path, length: prefixLength) { return .compact(UInt64(index) << 48 | address) }
        guard prefixes.count < Self.maximumPrefixes else { return .path(path) }
        prefixes.append(String(decoding: path.rawValue.utf8.prefix(prefixLength), as: UTF8.self))
        return .compact(UInt64(prefixes.count - 1) << 48 | address)
    }

    private func prefixIndex(_ path: DBusObjectPath, length: Int) -> Int? {
        // The bytes are compared in place: `starts(with:)` of one `UTF8View` with another went
        // byte by byte through the generic collection code, three times per advertisement report.
        let found = path.rawValue.utf8.withContiguousStorageIfAvailable { bytes in
            prefixes.firstIndex { prefix in
                guard prefix.utf8.count == length else { return false }
                let equal = prefix.utf8.withContiguousStorageIfAvailable {
                    memcmp(bytes.baseAddress!, $0.baseAddress!, length) == 0
                }
                return equal ?? prefix.utf8.elementsEqual(bytes.prefix(length))
            }
        }
        // Native strings are contiguous; the generic way for any other kind.
        return found ?? prefixes.firstIndex { $0.utf8.count == length && path.rawValue.utf8.starts(with: $0.utf8) }
    }

    /// The address in `path` and the length of its directory (with the final slash), when the
    /// path has BlueZ's form.
    private static func parse(_ path: DBusObjectPath) -> (address: UInt64, prefixLength: Int)? {
        var raw = path.rawValue
        return raw.withUTF8 { utf8 in
            guard let address = compactAddress(utf8) else { return nil }
            return (address, utf8.count - 21)
        }
    }

    /// The address of a path whose last element is `dev_` and an upper-case address with `_`
    /// separators, after a `/`; nil for any other path.
    private static func compactAddress(_ utf8: UnsafeBufferPointer<UInt8>) -> UInt64? {
        // "/dev_" + 6 × 2 digits + 5 separators.
        guard utf8.count >= 22 else { return nil }
        let start = utf8.count - 21
        guard utf8[start - 1] == UInt8(ascii: "/"), utf8[start] == UInt8(ascii: "d"),
            utf8[start + 1] == UInt8(ascii: "e"),
            utf8[start + 2] == UInt8(ascii: "v"), utf8[start + 3] == UInt8(ascii: "_")
        else { return nil }
        var address: UInt64 = 0
        for octet in 0..<6 {
            let at = start + 4 + 3 * octet
            if octet > 0 { guard utf8[at - 1] == UInt8(ascii: "_") else { return nil } }
            for digit in utf8[at..<(at + 2)] {
                // Upper case only, as BlueZ writes paths (a key stands for one path).
                let nibble = Hex.value(digit)
                guard nibble < 0x10, digit < UInt8(ascii: "a") else { return nil }
                address = address << 4 | UInt64(nibble)
            }
        }
        return address
    }

    /// The path a key stands for.
    func path(_ key: Key) -> DBusObjectPath {
        switch key {
        case .path(let path): return path
        case .compact(let value):
            let address = BluetoothAddress(rawValue: value)
            // A registered directory and a valid element: always a valid path.
            return DBusObjectPath(rawValue: prefixes[Int(value >> 48)] + address.bluezPathComponent)!
        }
    }

    func contains(_ key: Key) -> Bool {
        switch key {
        case .compact(let value): compact[value] != nil
        case .path(let path): other[path] != nil
        }
    }

    subscript(path: DBusObjectPath) -> DeviceObject? {
        self[key(path)]
    }

    subscript(key: Key) -> DeviceObject? {
        switch key {
        case .compact(let value): compact[value]
        case .path(let path): other[path]
        }
    }

    /// Adds or replaces the device at `path`.
    mutating func insert(_ device: DeviceObject, at path: DBusObjectPath) {
        switch insertionKey(path) {
        case .compact(let value): compact[value] = device
        case .path(let path): other[path] = device
        }
    }

    /// Changes the device with `key` in place; false when there is none.
    mutating func modify(_ key: Key, _ body: (inout DeviceObject) -> Void) -> Bool {
        switch key {
        case .compact(let value):
            guard compact[value] != nil else { return false }
            body(&compact[value]!)
        case .path(let path):
            guard other[path] != nil else { return false }
            body(&other[path]!)
        }
        return true
    }

    mutating func remove(_ path: DBusObjectPath) {
        switch key(path) {
        case .compact(let value): compact.removeValue(forKey: value)
        case .path(let path): other.removeValue(forKey: path)
        }
    }

    /// Removes the devices whose path starts with `prefix` (a directory with its final slash).
    mutating func removeAll(below prefix: String) {
        let directories = Set(prefixes.indices.filter { prefixes[$0].hasPrefix(prefix) }.map(UInt64.init))
        if !directories.isEmpty { compact = compact.filter { !directories.contains($0.key >> 48) } }
        other = other.filter { !$0.key.rawValue.hasPrefix(prefix) }
    }

    /// The number of devices below `prefix` (a directory with its final slash).
    func count(below prefix: String) -> Int {
        var count = other.keys.reduce(0) { $0 + ($1.rawValue.hasPrefix(prefix) ? 1 : 0) }
        for index in prefixes.indices where prefixes[index].hasPrefix(prefix) {
            count += compact.keys.reduce(0) { $0 + ($1 >> 48 == UInt64(index) ? 1 : 0) }
        }
        return count
    }

    /// The paths of the devices, optionally only those below `prefix` (with its final slash).
    func paths(below prefix: String?) -> [DBusObjectPath] {
        var paths: [DBusObjectPath] = []
        for key in compact.keys {
            if let prefix, !prefixes[Int(key >> 48)].hasPrefix(prefix) { continue }
            paths.append(path(.compact(key)))
        }
        for path in other.keys {
            if let prefix, !path.rawValue.hasPrefix(prefix) { continue }
            paths.append(path)
        }
        return paths
    }
}
