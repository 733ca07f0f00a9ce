import Bluetooth
import DBus

/// BlueZ's objects as last seen: one `GetManagedObjects` snapshot kept current with
/// `InterfacesAdded`, `InterfacesRemoved` and `PropertiesChanged`. Only the interfaces the central
/// uses are kept, and of those only the properties it reads (``keptProperties``), so memory is
/// proportional to the objects BlueZ currently exports (an object is dropped as soon as BlueZ
/// removes it) and small per object: with a thousand advertising devices a device's `Alias`,
/// `Class`, `Icon`, `Paired`, `Trusted`, `Adapter`, `AdvertisingFlags`… are not worth keeping.
///
/// Devices, the many objects, are kept apart in a ``DeviceTable`` of compact ``DeviceObject``s
/// (read with ``device(_:)``); adapters and GATT objects, a few, as generic ``PropertyList``s.
package struct BlueZObjectTree {
    package static let adapter = "org.bluez.Adapter1"
    package static let device = "org.bluez.Device1"
    package static let service = "org.bluez.GattService1"
    package static let characteristic = "org.bluez.GattCharacteristic1"
    package static let descriptor = "org.bluez.GattDescriptor1"

    /// The properties the central reads, per kept interface. Anything else BlueZ sends (in
    /// `InterfacesAdded`, `GetManagedObjects` or `PropertiesChanged`) is dropped on arrival. The
    /// names stored are these literals, not the decoded strings: a name over 15 bytes
    /// (`org.bluez.Device1`, `ServicesResolved`, `ManufacturerData`) would otherwise be a heap
    /// allocation per object.
    package static let keptProperties: [(interface: String, keys: [String])] = [
        (adapter, ["Address", "Powered", "PowerState", "Roles"]),
        (device, DeviceObject.keys),
        (service, ["UUID", "Primary"]),
        (characteristic, ["UUID", "Flags", "NotifyAcquired", "MTU"]),
        (descriptor, ["UUID"]),
    ]

    /// The kept interface named `name` (its literal name and kept properties), or nil.
    package static func kept(_ name: String) -> (interface: String, keys: [String])? {
        keptProperties.first { $0.interface == name }
    }

    package typealias Properties = PropertyList

    package init() {}

    /// Every kept interface but `Device1`, by object.
    private(set) var objects: [DBusObjectPath: InterfaceList] = [:]
    /// The `Device1` interfaces.
    private(set) var devices = DeviceTable()

    /// Number of objects (paths) with a kept interface.
    package var count: Int {
        objects.count + devices.count - objects.keys.reduce(0) { $0 + (devices[$1] != nil ? 1 : 0) }
    }

    /// Whether an object at `path` has a kept interface.
    package func contains(_ path: DBusObjectPath) -> Bool {
        objects[path] != nil || devices[path] != nil
    }

    mutating func removeAll() {
        objects.removeAll()
        devices.removeAll()
    }

    /// A change a signal (or the central itself) made while a `GetManagedObjects` was awaited.
    enum Mutation {
        case added(DBusObjectPath, DBusValue)
        case removed(DBusObjectPath, [String])
        case changed(DBusObjectPath, String, PropertyChanges, [String])
    }

    /// The changes made since ``beginSnapshot()``, nil when no snapshot is awaited. bluetoothd
    /// may make its `GetManagedObjects` reply before a change it signals next (an adapter it
    /// registers just after taking its bus name, a `ServicesResolved`), and that signal may be
    /// handled before the reply's caller resumes: ``load(_:)`` applies the journal again over the
    /// snapshot, so an older snapshot never undoes a newer signal.
    private var journal: [Mutation]?
    /// Set when more than ``journalLimit`` changes came while a snapshot was awaited (the
    /// journal is then given up: memory stays bounded, and ``load(_:)`` says so).
    private var journalOverflowed = false
    /// The most changes kept while a snapshot is awaited (a storm of advertisement reports
    /// during a slow reply; the journal holds the signals' decoded values).
    static let journalLimit = 4096

    /// Starts recording changes for the snapshot about to be requested.
    package mutating func beginSnapshot() {
        journal = []
        journalOverflowed = false
    }

    /// The snapshot will not come (the call failed): stops recording.
    package mutating func endSnapshot() {
        journal = nil
        journalOverflowed = false
    }

    private mutating func record(_ mutation: () -> Mutation) {
        guard journal != nil else { return }
        if journal!.count >= Self.journalLimit {
            journal = nil
            journalOverflowed = true
            return
        }
        journal!.append(mutation())
    }

    /// Replaces everything with a `GetManagedObjects` reply (`a{oa{sa{sv}}}`), then applies again
    /// what changed since ``beginSnapshot()``. False when those changes were too many to keep
    /// (the tree may then be older than the signals already handled: read it again).
    @discardableResult
    package mutating func load(_ reply: DBusValue) -> Bool {
        let since = journal ?? []
        let complete = !journalOverflowed
        endSnapshot()
        removeAll()
        for entry in reply.entries ?? [] {
            guard let path = entry.key.objectPath else { continue }
            add(path, interfaces: entry.value)
        }
        for mutation in since {
            switch mutation {
            case .added(let path, let interfaces): add(path, interfaces: interfaces)
            case .removed(let path, let interfaces): remove(path, interfaces: interfaces)
            case .changed(let path, let interface, let changed, let invalidated):
                change(path, interface: interface, changed: changed, invalidated: invalidated)
            }
        }
        return complete
    }

    /// Applies `InterfacesAdded(o, a{sa{sv}})`; returns the kept interface names added.
    @discardableResult
    package mutating func add(_ path: DBusObjectPath, interfaces: DBusValue) -> [String] {
        record { .added(path, interfaces) }
        var added: [String] = []
        for entry in interfaces.entries ?? [] {
            guard let name = entry.key.string, let kept = Self.kept(name) else { continue }
            if kept.interface == Self.device {
                devices.insert(DeviceObject(entry.value.entries ?? []), at: path)
            } else {
                objects[path, default: [:]][kept.interface] = PropertyList(
                    entry.value.entries ?? [], keeping: kept.keys)
            }
            added.append(kept.interface)
        }
        return added
    }

    /// Applies `InterfacesRemoved(o, as)`; removes the object when nothing is left. When a
    /// device goes, its GATT children go with it (BlueZ sends separate signals for them, but
    /// not reliably on shutdown).
    package mutating func remove(_ path: DBusObjectPath, interfaces: [String]) {
        record { .removed(path, interfaces) }
        guard contains(path) else { return }
        if interfaces.contains(Self.device) { devices.remove(path) }
        if var entry = objects[path] {
            for name in interfaces { entry.removeValue(forKey: name) }
            if entry.isEmpty { objects.removeValue(forKey: path) } else { objects[path] = entry }
        }
        if interfaces.contains(Self.device) || interfaces.contains(Self.adapter) { removeDescendants(of: path) }
    }

    mutating func removeDescendants(of path: DBusObjectPath) {
        let prefix = path.rawValue + "/"
        for key in objects.keys where key.rawValue.hasPrefix(prefix) { objects.removeValue(forKey: key) }
        devices.removeAll(below: prefix)
    }

    /// Applies `PropertiesChanged(s, a{sv}, as)` (properties the central does not read are
    /// ignored); false when the object or interface is unknown.
    @discardableResult
    package mutating func change(
        _ path: DBusObjectPath, interface: String, changed: [String: DBusValue], invalidated: [String]
    ) -> Bool {
        change(path, interface: interface, changed: PropertyChanges(changed), invalidated: invalidated)
    }

    /// As ``change(_:interface:changed:invalidated:)``, with the changes as the signal carried them.
    @discardableResult
    mutating func change(
        _ path: DBusObjectPath, interface: String, changed: PropertyChanges, invalidated: [String]
    ) -> Bool {
        if interface == Self.device {
            return changeDevice(devices.key(path), changed: changed, invalidated: invalidated)
        }
        record { .changed(path, interface, changed, invalidated) }
        guard let kept = Self.kept(interface), objects[path]?[kept.interface] != nil else { return false }
        changed.forEach { key, value in
            guard let keptKey = kept.keys.first(where: { $0 == key }) else { return }
            objects[path]?[kept.interface]?[keptKey] = value
        }
        for key in invalidated { objects[path]?[kept.interface]?.removeValue(forKey: key) }
        return true
    }

    /// Applies a `PropertiesChanged` of `Device1` to the device with `key` (``DeviceTable/key(_:)``
    /// of its path, worked out once per signal by the caller); false when there is none.
    mutating func changeDevice(_ key: DeviceTable.Key, changed: PropertyChanges, invalidated: [String]) -> Bool {
        if journal != nil {
            let path = devices.path(key)
            record { .changed(path, Self.device, changed, invalidated) }
        }
        return devices.modify(key) { $0.change(changed, invalidated: invalidated) }
    }

    /// The kept properties of an adapter or GATT object (a device's are read with ``device(_:)``).
    package func properties(_ path: DBusObjectPath, _ interface: String) -> Properties? {
        objects[path]?[interface]
    }

    /// The device at `path`, when BlueZ has one there.
    package func device(_ path: DBusObjectPath) -> DeviceObject? {
        devices[path]
    }

    /// The device with `key` (``DeviceTable/key(_:)`` of its path), when BlueZ has one there.
    func device(_ key: DeviceTable.Key) -> DeviceObject? {
        devices[key]
    }

    /// Number of devices below `parent` (without building their paths).
    package func deviceCount(below parent: DBusObjectPath) -> Int {
        devices.count(below: parent.rawValue + "/")
    }

    /// Paths of objects carrying `interface`, optionally only below `parent`, sorted.
    package func paths(with interface: String, below parent: DBusObjectPath? = nil) -> [DBusObjectPath] {
        let prefix = parent.map { $0.rawValue + "/" }
        if interface == Self.device { return devices.paths(below: prefix).sorted() }
        return objects.compactMap { path, interfaces in
            guard interfaces[interface] != nil else { return nil }
            if let prefix, !path.rawValue.hasPrefix(prefix) { return nil }
            return path
        }.sorted()
    }

    /// The adapter `selector` names: with ``AdapterSelector/first`` the first adapter (by path)
    /// whose `Roles` include `role` (or that reports no roles), preferring a powered one. Only
    /// objects where bluetoothd puts adapters count (`/org/bluez/<name>`): an `Adapter1` that
    /// anything else on the bus claims at `/org/bluez` or below a device is not one.
    package func adapter(matching selector: AdapterSelector, role: String) -> DBusObjectPath? {
        let candidates = paths(with: Self.adapter).filter { path in
            let name = path.rawValue.dropFirst("/org/bluez/".count)
            guard path.rawValue.hasPrefix("/org/bluez/"), !name.isEmpty, !name.contains("/") else { return false }
            let props = properties(path, Self.adapter) ?? [:]
            switch selector {
            case .first:
                let roles = props["Roles"]?.strings
                return roles == nil || roles?.contains(role) == true
            case .name(let name): return path.rawValue == "/org/bluez/\(name)"
            case .address(let address): return props["Address"]?.string.flatMap(BluetoothAddress.init) == address
            }
        }
        return candidates.first { properties($0, Self.adapter)?["Powered"]?.bool == true } ?? candidates.first
    }
}

/// A few values by name in a list, read and written like a dictionary: an object's kept
/// interfaces (usually one) and an interface's kept properties (at most ten). A `Dictionary` of
/// ten entries takes sixteen buckets, and one of a single entry is an allocation several times
/// its size; a lookup here compares a handful of interned names.
struct SmallMap<Value>: ExpressibleByDictionaryLiteral {
    private(set) var pairs: [(key: String, value: Value)] = []

    init(dictionaryLiteral elements: (String, Value)...) {
        for (key, value) in elements { self[key] = value }
    }

    /// `pairs` (unique keys) with no spare capacity.
    init(exactly pairs: [(key: String, value: Value)]) {
        self.pairs.reserveCapacity(pairs.count)
        self.pairs.append(contentsOf: pairs)
    }

    var isEmpty: Bool { pairs.isEmpty }
    var keys: [String] { pairs.map(\.key) }

    subscript(key: String) -> Value? {
        get { pairs.first { $0.key == key }?.value }
        set {
            let index = pairs.firstIndex { $0.key == key }
            switch (index, newValue) {
            case (let index?, let value?): pairs[index].value = value
            case (let index?, nil): pairs.remove(at: index)
            case (nil, let value?):
                // One more slot, not twice as many: a list is made to size and seldom grows (a
                // property BlueZ sets later, such as RSSI), so a doubled one would stay half empty.
                if pairs.count == pairs.capacity { pairs.reserveCapacity(pairs.count + 1) }
                pairs.append((key, value))
            case (nil, nil): break
            }
        }
    }

    mutating func removeValue(forKey key: String) {
        self[key] = nil
    }
}

/// One object's kept interfaces.
typealias InterfaceList = SmallMap<PropertyList>

/// One object's kept properties of one interface. Values are stored without their variant
/// wrapper (the accessors look through it anyway), and byte arrays — `ManufacturerData` and
/// `ServiceData` (`a{qv}`/`a{sv}` of `ay`) — as plain bytes: a ``DBusValue`` array spends 24
/// bytes per byte. Reading such a property builds the ``DBusValue`` again.
package struct PropertyList: ExpressibleByDictionaryLiteral {
    private enum Stored {
        case value(DBusValue)
        /// `ay`
        case bytes([UInt8])
        /// `a{Kv}` whose every value is an `ay` (in a variant): the key type and the entries.
        case byteEntries(DBusType, [(key: DBusValue, bytes: [UInt8])])

        init(_ value: DBusValue) {
            let value = value.unwrapped
            switch value {
            case .array(.byte, _):
                self = .bytes(value.bytes ?? [])
            case .dictionary(let keyType, .variant, let entries) where !entries.isEmpty:
                var compact: [(key: DBusValue, bytes: [UInt8])] = []
                compact.reserveCapacity(entries.count)
                for entry in entries {
                    guard let bytes = entry.value.bytes else {
                        self = .value(value)
                        return
                    }
                    compact.append((entry.key, bytes))
                }
                self = .byteEntries(keyType, compact)
            default:
                self = .value(value)
            }
        }

        var value: DBusValue {
            switch self {
            case .value(let value): value
            case .bytes(let bytes): .bytes(bytes)
            case .byteEntries(let keyType, let entries):
                .dictionary(
                    key: keyType, value: .variant,
                    entries.map { DBusDictionaryEntry($0.key, .variant(.bytes($0.bytes))) })
            }
        }
    }

    private var stored: SmallMap<Stored>

    package init(dictionaryLiteral elements: (String, DBusValue)...) {
        stored = [:]
        for (key, value) in elements { self[key] = value }
    }

    /// The entries of an `a{sv}` whose names are in `keys`, named by the literal in `keys`
    /// (when a name repeats, the last entry wins).
    init(_ entries: [DBusDictionaryEntry], keeping keys: [String]) {
        var kept: [(key: String, value: Stored)] = []
        for entry in entries {
            guard let name = entry.key.string, let key = keys.first(where: { $0 == name }) else { continue }
            kept.removeAll { $0.key == key }
            kept.append((key, Stored(entry.value)))
        }
        stored = SmallMap(exactly: kept)
    }

    package var isEmpty: Bool { stored.isEmpty }
    package var keys: [String] { stored.keys }

    package subscript(key: String) -> DBusValue? {
        get { stored[key]?.value }
        set { stored[key] = newValue.map(Stored.init) }
    }

    mutating func removeValue(forKey key: String) {
        stored.removeValue(forKey: key)
    }

    /// The entries of a byte-array map (`ManufacturerData`, `ServiceData`) as stored, without
    /// building the ``DBusValue`` again: this is read for every advertisement report.
    func byteEntries(_ key: String) -> [(key: DBusValue, bytes: [UInt8])] {
        switch stored[key] {
        case .byteEntries(_, let entries)?: entries
        case .value(let value)?: (value.entries ?? []).compactMap { entry in entry.value.bytes.map { (entry.key, $0) } }
        case .bytes?, nil: []
        }
    }
}
