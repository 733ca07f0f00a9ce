import Bluetooth
import DBus

/// An application's GATT tree as bluetoothd 5.66 reads it at `RegisterApplication`
/// (`src/gatt-database.c`): the objects below the root that carry `GattService1`,
/// `GattCharacteristic1` or `GattDescriptor1`, checked for their required properties, then laid
/// into the adapter's local database (handles allocated, a CCCD added per notify/indicate
/// characteristic).
public struct LocalApplicationTree: Sendable, Equatable {
    public struct Service: Sendable, Equatable {
        public var path: DBusObjectPath
        public var uuid: BluetoothUUID
        public var primary: Bool
        /// The service declaration handle (0 until laid out).
        public var handle: UInt16 = 0
        /// The app exports a `Handle` property with value 0: bluetoothd writes the allocated handle back.
        public var wantsHandle: Bool
        public var characteristics: [Characteristic] = []
    }

    public struct Characteristic: Sendable, Equatable {
        public var path: DBusObjectPath
        public var uuid: BluetoothUUID
        /// The server flags the app declared.
        public var flags: [String]
        public var handle: UInt16 = 0
        public var valueHandle: UInt16 = 0
        public var wantsHandle: Bool
        /// The CCCD bluetoothd adds for notify/indicate (not an app object).
        public var cccdHandle: UInt16?
        public var descriptors: [Descriptor] = []

        /// The flags a remote client sees (`GattCharacteristic1.Flags` on the central side): the
        /// ATT properties the declaration carries, security flags folded into their operation.
        public var clientFlags: [String] {
            func any(_ names: String...) -> Bool { names.contains { flags.contains($0) } }
            var result: [String] = []
            if any("broadcast") { result.append("broadcast") }
            if any("read", "encrypt-read", "encrypt-authenticated-read", "secure-read") { result.append("read") }
            if any("write-without-response") { result.append("write-without-response") }
            if any("write", "encrypt-write", "encrypt-authenticated-write", "secure-write") { result.append("write") }
            if any("notify", "encrypt-notify", "encrypt-authenticated-notify", "secure-notify") {
                result.append("notify")
            }
            if any("indicate", "encrypt-indicate", "encrypt-authenticated-indicate", "secure-indicate") {
                result.append("indicate")
            }
            if any("authenticated-signed-writes") { result.append("authenticated-signed-writes") }
            if any("reliable-write", "writable-auxiliaries") {
                result.append("extended-properties")
                if any("reliable-write") { result.append("reliable-write") }
                if any("writable-auxiliaries") { result.append("writable-auxiliaries") }
            }
            return result
        }
    }

    public struct Descriptor: Sendable, Equatable {
        public var path: DBusObjectPath
        public var uuid: BluetoothUUID
        public var flags: [String]
        public var handle: UInt16 = 0
        public var wantsHandle: Bool
    }

    /// Why a tree is refused, with bluetoothd's reply text.
    public enum Refusal: Error, Sendable, Equatable {
        /// No GATT object at or below the root: `Failed` "No object received".
        case noObject
        /// An object lacks a required property, has a bad value, an unknown flag, or points to a
        /// parent that is not in the tree: `Failed` "No valid service object found".
        case invalidObject(String)
        /// The database refused the service (GAP/GATT UUIDs, which bluetoothd provides itself):
        /// `Failed` "Failed to create entry in database".
        case database(String)

        public var error: DBusError {
            switch self {
            case .noObject: BlueZError.failed("No object received")
            case .invalidObject: BlueZError.failed("No valid service object found")
            case .database: BlueZError.failed("Failed to create entry in database")
            }
        }
    }

    public static let serviceInterface = "org.bluez.GattService1"
    public static let characteristicInterface = "org.bluez.GattCharacteristic1"
    public static let descriptorInterface = "org.bluez.GattDescriptor1"

    /// Characteristic flags bluetoothd 5.66 accepts from an application (`chrc_flags`).
    public static let characteristicFlags: Set<String> = [
        "broadcast", "read", "write-without-response", "write", "notify", "indicate",
        "authenticated-signed-writes", "extended-properties", "reliable-write", "writable-auxiliaries",
        "encrypt-read", "encrypt-write", "encrypt-notify", "encrypt-indicate",
        "encrypt-authenticated-read", "encrypt-authenticated-write", "encrypt-authenticated-notify",
        "encrypt-authenticated-indicate", "secure-read", "secure-write", "secure-notify", "secure-indicate",
        "authorize",
    ]
    /// Descriptor flags bluetoothd 5.66 accepts (`desc_flags`).
    public static let descriptorFlags: Set<String> = [
        "read", "write", "encrypt-read", "encrypt-write", "encrypt-authenticated-read", "encrypt-authenticated-write",
        "secure-read", "secure-write", "authorize",
    ]

    public var services: [Service]

    /// Reads a `GetManagedObjects` reply (`a{oa{sa{sv}}}`) from the application at `root`.
    /// - Throws: ``Refusal``.
    public init(managedObjects: DBusValue, root: DBusObjectPath) throws(Refusal) {
        var services: [Service] = []
        var characteristics: [(service: DBusObjectPath, Characteristic)] = []
        var descriptors: [(characteristic: DBusObjectPath, Descriptor)] = []
        var found = false
        for entry in managedObjects.entries ?? [] {
            guard let path = entry.key.objectPath, path.isDescendant(of: root) else { continue }
            let interfaces = entry.value
            if let properties = interfaces[Self.serviceInterface] {
                found = true
                let uuid = try Self.uuid(properties, path)
                guard let primary = properties["Primary"]?.bool else {
                    throw .invalidObject("\(path): Primary (b) missing")
                }
                let handle = try Self.handle(properties, path)
                guard uuid != BluetoothUUID(0x1800), uuid != BluetoothUUID(0x1801) else {
                    throw .database("\(path): GAP and GATT services are bluetoothd's own")
                }
                services.append(Service(path: path, uuid: uuid, primary: primary, wantsHandle: handle == 0))
            }
            if let properties = interfaces[Self.characteristicInterface] {
                found = true
                let member = try Self.member(properties, path, parent: "Service", allowed: Self.characteristicFlags)
                characteristics.append(
                    (
                        member.parent,
                        Characteristic(
                            path: path, uuid: member.uuid, flags: member.flags, wantsHandle: member.wantsHandle)
                    ))
            }
            if let properties = interfaces[Self.descriptorInterface] {
                found = true
                let member = try Self.member(
                    properties, path, parent: "Characteristic", allowed: Self.descriptorFlags)
                descriptors.append(
                    (
                        member.parent,
                        Descriptor(path: path, uuid: member.uuid, flags: member.flags, wantsHandle: member.wantsHandle)
                    ))
            }
        }
        guard found else { throw .noObject }
        guard !services.isEmpty else { throw .invalidObject("no GattService1 object") }
        services.sort { $0.path < $1.path }
        for (servicePath, characteristic) in characteristics.sorted(by: { $0.1.path < $1.1.path }) {
            guard let index = services.firstIndex(where: { $0.path == servicePath }) else {
                throw .invalidObject("\(characteristic.path): service \(servicePath) is not in the application")
            }
            services[index].characteristics.append(characteristic)
        }
        for (characteristicPath, descriptor) in descriptors.sorted(by: { $0.1.path < $1.1.path }) {
            var placed = false
            for s in services.indices {
                if let c = services[s].characteristics.firstIndex(where: { $0.path == characteristicPath }) {
                    services[s].characteristics[c].descriptors.append(descriptor)
                    placed = true
                }
            }
            guard placed else {
                throw .invalidObject(
                    "\(descriptor.path): characteristic \(characteristicPath) is not in the application")
            }
        }
        self.services = services
    }

    /// Allocates handles from `next` in bluetoothd's order: service declaration, then per
    /// characteristic the declaration and value handles, the CCCD (notify/indicate) and the
    /// app's descriptors (an app's own 0x2902 is skipped: bluetoothd adds its own CCCD).
    public mutating func layOut(from next: inout UInt16) {
        for s in services.indices {
            services[s].handle = next
            next &+= 1
            for c in services[s].characteristics.indices {
                var characteristic = services[s].characteristics[c]
                characteristic.handle = next
                characteristic.valueHandle = next &+ 1
                next &+= 2
                let flags = characteristic.clientFlags
                if flags.contains("notify") || flags.contains("indicate") {
                    characteristic.cccdHandle = next
                    next &+= 1
                }
                characteristic.descriptors.removeAll { $0.uuid == GATTLayout.cccd }
                for d in characteristic.descriptors.indices {
                    characteristic.descriptors[d].handle = next
                    next &+= 1
                }
                services[s].characteristics[c] = characteristic
            }
        }
    }

    /// The `(path, interface, handle)` of every object whose `Handle` property is 0 (to write back).
    public var handleWriteBacks: [(path: DBusObjectPath, interface: String, handle: UInt16)] {
        var result: [(DBusObjectPath, String, UInt16)] = []
        for service in services {
            if service.wantsHandle { result.append((service.path, Self.serviceInterface, service.handle)) }
            for characteristic in service.characteristics {
                if characteristic.wantsHandle {
                    result.append((characteristic.path, Self.characteristicInterface, characteristic.valueHandle))
                }
                for descriptor in characteristic.descriptors where descriptor.wantsHandle {
                    result.append((descriptor.path, Self.descriptorInterface, descriptor.handle))
                }
            }
        }
        return result
    }

    /// What a characteristic or a descriptor must have: `UUID`, its parent's path (the `parent`
    /// property: `Service`, `Characteristic`), `Flags` of the `allowed` ones, and an optional
    /// `Handle` (0: the allocated one is written back).
    private static func member(
        _ properties: DBusValue, _ path: DBusObjectPath, parent key: String, allowed: Set<String>
    ) throws(Refusal) -> (uuid: BluetoothUUID, parent: DBusObjectPath, flags: [String], wantsHandle: Bool) {
        let uuid = try uuid(properties, path)
        guard let parent = properties[key]?.objectPath else { throw .invalidObject("\(path): \(key) (o) missing") }
        let flags = try flags(properties, path, allowed: allowed)
        let handle = try handle(properties, path)
        return (uuid, parent, flags, handle == 0)
    }

    private static func uuid(_ properties: DBusValue, _ path: DBusObjectPath) throws(Refusal) -> BluetoothUUID {
        guard let text = properties["UUID"]?.string else { throw .invalidObject("\(path): UUID (s) missing") }
        guard let uuid = BluetoothUUID(text) else { throw .invalidObject("\(path): \"\(text)\" is not a UUID") }
        return uuid
    }

    private static func handle(_ properties: DBusValue, _ path: DBusObjectPath) throws(Refusal) -> UInt16? {
        guard let value = properties["Handle"] else { return nil }
        guard let handle = value.uint16 else { throw .invalidObject("\(path): Handle is not a uint16") }
        return handle
    }

    private static func flags(_ properties: DBusValue, _ path: DBusObjectPath, allowed: Set<String>) throws(Refusal)
        -> [String]
    {
        guard let flags = properties["Flags"]?.strings else { throw .invalidObject("\(path): Flags (as) missing") }
        for flag in flags where !allowed.contains(flag) {
            throw .invalidObject("\(path): unknown flag \"\(flag)\"")
        }
        return flags
    }
}

/// The ATT error bluetoothd's server answers when the application's method returns `error`
/// (5.66 `gatt-database.c`): `Failed` with "0x80"…"0x9f" is that application error, other
/// numbers 0x0E, other text 0x80; the named errors map as in docs/bluez.md §5.2.
public func attError(fromApplication error: DBusError, write: Bool) -> UInt8 {
    let name = error.name.rawValue
    switch name {
    case "org.bluez.Error.Failed":
        let text = error.message.lowercased()
        guard text.hasPrefix("0x"), let code = UInt8(text.dropFirst(2), radix: 16) else {
            return text.first.map { $0.isNumber } == true ? 0x0E : 0x80
        }
        return (0x80...0x9F).contains(code) ? code : 0x0E
    case "org.bluez.Error.NotSupported": return 0x06
    case "org.bluez.Error.NotAuthorized": return 0x08
    case "org.bluez.Error.InvalidValueLength": return 0x0D
    case "org.bluez.Error.InvalidOffset": return 0x07
    case "org.bluez.Error.InProgress": return 0xFE
    case "org.bluez.Error.NotPermitted": return write ? 0x03 : 0x02
    default: return 0x0E
    }
}
