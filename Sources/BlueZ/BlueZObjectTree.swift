import Bluetooth
import DBus

/// BlueZ's objects as last seen: one `GetManagedObjects` snapshot kept current with
/// `InterfacesAdded`, `InterfacesRemoved` and `PropertiesChanged`. Only the interfaces the central
/// uses are kept, so memory is proportional to the objects BlueZ currently exports (an object is
/// dropped as soon as BlueZ removes it).
struct BlueZObjectTree {
    static let adapter = "org.bluez.Adapter1"
    static let device = "org.bluez.Device1"
    static let service = "org.bluez.GattService1"
    static let characteristic = "org.bluez.GattCharacteristic1"
    static let descriptor = "org.bluez.GattDescriptor1"
    static let kept: Set<String> = [adapter, device, service, characteristic, descriptor]

    typealias Properties = [String: DBusValue]

    private(set) var objects: [DBusObjectPath: [String: Properties]] = [:]

    var count: Int { objects.count }

    mutating func removeAll() { objects.removeAll() }

    /// Replaces everything with a `GetManagedObjects` reply (`a{oa{sa{sv}}}`).
    mutating func load(_ reply: DBusValue) {
        objects.removeAll()
        for entry in reply.entries ?? [] {
            guard let path = entry.key.objectPath else { continue }
            add(path, interfaces: entry.value)
        }
    }

    /// Applies `InterfacesAdded(o, a{sa{sv}})`; returns the kept interface names added.
    @discardableResult
    mutating func add(_ path: DBusObjectPath, interfaces: DBusValue) -> [String] {
        var added: [String] = []
        for entry in interfaces.entries ?? [] {
            guard let name = entry.key.string, Self.kept.contains(name) else { continue }
            objects[path, default: [:]][name] = entry.value.dictionary ?? [:]
            added.append(name)
        }
        return added
    }

    /// Applies `InterfacesRemoved(o, as)`; removes the object when nothing is left. When a
    /// device goes, its GATT children go with it (BlueZ sends separate signals for them, but
    /// not reliably on shutdown).
    mutating func remove(_ path: DBusObjectPath, interfaces: [String]) {
        guard var entry = objects[path] else { return }
        for name in interfaces { entry.removeValue(forKey: name) }
        if entry.isEmpty { objects.removeValue(forKey: path) } else { objects[path] = entry }
        if interfaces.contains(Self.device) || interfaces.contains(Self.adapter) { removeDescendants(of: path) }
    }

    mutating func removeDescendants(of path: DBusObjectPath) {
        let prefix = path.rawValue + "/"
        for key in objects.keys where key.rawValue.hasPrefix(prefix) { objects.removeValue(forKey: key) }
    }

    /// Applies `PropertiesChanged(s, a{sv}, as)`; false when the object or interface is unknown.
    @discardableResult
    mutating func change(_ path: DBusObjectPath, interface: String, changed: [String: DBusValue], invalidated: [String]) -> Bool {
        guard objects[path]?[interface] != nil else { return false }
        for (key, value) in changed { objects[path]?[interface]?[key] = value }
        for key in invalidated { objects[path]?[interface]?.removeValue(forKey: key) }
        return true
    }

    func properties(_ path: DBusObjectPath, _ interface: String) -> Properties? {
        objects[path]?[interface]
    }

    /// Paths of objects carrying `interface`, optionally only below `parent`, sorted.
    func paths(with interface: String, below parent: DBusObjectPath? = nil) -> [DBusObjectPath] {
        let prefix = parent.map { $0.rawValue + "/" }
        return objects.compactMap { path, interfaces in
            guard interfaces[interface] != nil else { return nil }
            if let prefix, !path.rawValue.hasPrefix(prefix) { return nil }
            return path
        }.sorted()
    }

    /// The adapter `selector` names: with ``AdapterSelector/first`` the first adapter (by path)
    /// whose `Roles` include `role` (or that reports no roles), preferring a powered one.
    func adapter(matching selector: AdapterSelector, role: String) -> DBusObjectPath? {
        let candidates = paths(with: Self.adapter).filter { path in
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
