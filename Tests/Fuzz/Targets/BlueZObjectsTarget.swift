import BlueZ
import Bluetooth
import DBus

extension FuzzTargets {
    /// What org.bluez sends over D-Bus — a buggy or hostile bluetoothd, or anything that owns the
    /// name on a misconfigured bus: `GetManagedObjects` replies, `InterfacesAdded`,
    /// `InterfacesRemoved` and `PropertiesChanged` with fuzzed ``DBusValue`` trees, into the
    /// central's ``BlueZObjectTree``, each value also through libdbus and back (the real decoding
    /// path). See ``BlueZObjectsFuzz``.
    static let bluezObjects = FuzzTarget(
        name: "bluez-objects",
        summary:
            "org.bluez object tree updates (GetManagedObjects, InterfacesAdded/Removed, PropertiesChanged) with hostile values",
        seeds: { BlueZObjectsFuzz.seeds },
        run: { BlueZObjectsFuzz.run($0) })
}

/// The driver of ``FuzzTargets/bluezObjects``.
///
/// Encoding: up to 10 operations, each an op byte (bits 0–1: load, add, remove, change; bit 2:
/// the arguments go through libdbus first — encoded, marshalled, demarshalled, decoded — and
/// what comes back is used; bit 3: then the wire bytes are damaged at a few input-chosen places
/// and decoded again) and the operands from ``DBusValueGenerator``.
///
/// Properties: no trap; a round trip of a value libdbus accepts gives the same value back; and
/// the tree agrees with a plain model of the same updates (``Model``): the same objects and
/// interfaces, the kept properties of adapters and GATT objects, and of every device what the
/// central reads — address (only one that parses), address type, name, flags, RSSI and TX power
/// (clamped integers or absent), service UUIDs that parse, manufacturer and service data.
enum BlueZObjectsFuzz {
    /// The same updates applied to dictionaries: what the tree should hold.
    struct Model {
        var devices: [DBusObjectPath: [String: DBusValue]] = [:]
        var objects: [DBusObjectPath: [String: [String: DBusValue]]] = [:]

        static func keep(_ entries: [DBusDictionaryEntry], _ keys: [String]) -> [String: DBusValue] {
            var out: [String: DBusValue] = [:]
            for entry in entries {
                guard let name = entry.key.string, keys.contains(name) else { continue }
                out[name] = entry.value
            }
            return out
        }

        mutating func load(_ reply: DBusValue) {
            devices = [:]
            objects = [:]
            for entry in reply.entries ?? [] {
                guard let path = entry.key.objectPath else { continue }
                _ = add(path, entry.value)
            }
        }

        mutating func add(_ path: DBusObjectPath, _ interfaces: DBusValue) -> [String] {
            var added: [String] = []
            for entry in interfaces.entries ?? [] {
                guard let name = entry.key.string, let kept = BlueZObjectTree.kept(name) else { continue }
                if name == BlueZObjectTree.device {
                    devices[path] = Self.keep(entry.value.entries ?? [], DeviceObject.keys)
                } else {
                    objects[path, default: [:]][name] = Self.keep(entry.value.entries ?? [], kept.keys)
                }
                added.append(name)
            }
            return added
        }

        mutating func remove(_ path: DBusObjectPath, _ interfaces: [String]) {
            guard devices[path] != nil || objects[path] != nil else { return }
            if interfaces.contains(BlueZObjectTree.device) { devices[path] = nil }
            if var entry = objects[path] {
                for name in interfaces { entry[name] = nil }
                objects[path] = entry.isEmpty ? nil : entry
            }
            if interfaces.contains(BlueZObjectTree.device) || interfaces.contains(BlueZObjectTree.adapter) {
                let prefix = path.rawValue + "/"
                objects = objects.filter { !$0.key.rawValue.hasPrefix(prefix) }
                devices = devices.filter { !$0.key.rawValue.hasPrefix(prefix) }
            }
        }

        mutating func change(
            _ path: DBusObjectPath, _ interface: String, _ changed: [String: DBusValue], _ invalidated: [String]
        ) -> Bool {
            if interface == BlueZObjectTree.device {
                guard var device = devices[path] else { return false }
                for (key, value) in changed where DeviceObject.keys.contains(key) { device[key] = value }
                for key in invalidated { device[key] = nil }
                devices[path] = device
                return true
            }
            guard let kept = BlueZObjectTree.kept(interface), objects[path]?[interface] != nil else { return false }
            for (key, value) in changed where kept.keys.contains(key) { objects[path]?[interface]?[key] = value }
            for key in invalidated { objects[path]?[interface]?[key] = nil }
            return true
        }
    }

    static func run(_ bytes: [UInt8]) {
        var input = FuzzInput(bytes)
        var tree = BlueZObjectTree()
        var model = Model()
        var operations = 0
        while !input.isEmpty, operations < 10 {
            operations += 1
            let op = input.byte()
            var arguments: [DBusValue]
            switch op & 3 {
            case 0: arguments = [DBusValueGenerator.managedObjects(&input)]
            case 1: arguments = [.objectPath(DBusValueGenerator.path(&input)), DBusValueGenerator.interfaceMap(&input)]
            case 2:
                let names = (0..<(input.byte() % 3 + 1)).map { _ in
                    DBusValue.string(DBusValueGenerator.interface(&input))
                }
                arguments = [.objectPath(DBusValueGenerator.path(&input)), .array(.string, names)]
            default:
                let invalidated = (0..<(input.byte() % 3)).map { _ in
                    DBusValue.string(DBusValueGenerator.propertyName(&input))
                }
                arguments = [
                    .string(DBusValueGenerator.interface(&input)), DBusValueGenerator.properties(&input),
                    .array(.string, invalidated), .objectPath(DBusValueGenerator.path(&input)),
                ]
            }
            if op & 4 != 0 { arguments = roundTrip(arguments, &input, damage: op & 8 != 0) ?? arguments }
            apply(op & 3, arguments, &tree, &model)
            compare(tree, model)
        }
    }

    /// Through libdbus and back; nil when libdbus (or the encoder) refuses the value.
    static func roundTrip(_ arguments: [DBusValue], _ input: inout FuzzInput, damage: Bool) -> [DBusValue]? {
        guard let wire = try? DBusMessage.wire(arguments) else { return nil }
        let decoded: DBusMessage
        do {
            decoded = try DBusMessage.decode(wire: wire)
        } catch {
            fuzzProperty(false, "libdbus marshalled a message it then refused: \(error)")
            return nil
        }
        fuzzProperty(
            "\(decoded.arguments)" == "\(arguments)",
            "round trip changed the value: \(arguments) → \(decoded.arguments)")
        if damage, !wire.isEmpty {
            var damaged = wire
            for _ in 0..<(1 + input.byte() % 4) {
                damaged[Int(input.uint32()) % damaged.count] = input.byte()
            }
            if input.bool() { damaged.removeLast(Int(input.byte()) % damaged.count) }
            _ = try? DBusMessage.decode(wire: damaged)
        }
        return decoded.arguments
    }

    static func apply(_ op: UInt8, _ arguments: [DBusValue], _ tree: inout BlueZObjectTree, _ model: inout Model) {
        switch op {
        case 0:
            tree.load(arguments[0])
            model.load(arguments[0])
        case 1:
            // As CentralManager.handleObjectManager reads InterfacesAdded.
            guard arguments.count == 2, let path = arguments[0].objectPath else { return }
            let added = tree.add(path, interfaces: arguments[1])
            fuzzProperty(added == model.add(path, arguments[1]), "add(\(path)) reported \(added)")
        case 2:
            guard arguments.count == 2, let path = arguments[0].objectPath else { return }
            let names = arguments[1].strings ?? []
            tree.remove(path, interfaces: names)
            model.remove(path, names)
        default:
            // As handlePropertiesChanged reads it (the path is the message's).
            guard arguments.count == 4, let path = arguments[3].objectPath, let interface = arguments[0].string else {
                return
            }
            let changed = arguments[1].dictionary ?? [:]
            let invalidated = arguments[2].strings ?? []
            let result = tree.change(path, interface: interface, changed: changed, invalidated: invalidated)
            fuzzProperty(
                result == model.change(path, interface, changed, invalidated),
                "change(\(path), \(interface)) returned \(result)")
        }
    }

    static func compare(_ tree: BlueZObjectTree, _ model: Model) {
        let paths = Set(model.devices.keys).union(model.objects.keys)
        fuzzProperty(
            tree.count == paths.count, "the tree counts \(tree.count) objects, the updates leave \(paths.count)")
        fuzzProperty(tree.paths(with: BlueZObjectTree.device) == model.devices.keys.sorted(), "device paths differ")
        let hci0 = DBusObjectPath(rawValue: "/org/bluez/hci0") ?? .root
        fuzzProperty(
            tree.deviceCount(below: hci0)
                == model.devices.keys.filter { $0.rawValue.hasPrefix("/org/bluez/hci0/") }.count,
            "device count below hci0")
        fuzzProperty(
            tree.paths(with: BlueZObjectTree.device, below: hci0)
                == model.devices.keys.filter { $0.rawValue.hasPrefix("/org/bluez/hci0/") }.sorted(),
            "device paths below hci0")
        for (path, properties) in model.devices {
            guard let device = tree.device(path) else {
                fuzzProperty(false, "the tree lost the device at \(path)")
                return
            }
            check(device, properties, path)
        }
        for (interface, keys) in BlueZObjectTree.keptProperties where interface != BlueZObjectTree.device {
            let expected = model.objects.filter { $0.value[interface] != nil }.keys.sorted()
            fuzzProperty(tree.paths(with: interface) == expected, "paths with \(interface) differ")
            for path in expected {
                guard let properties = tree.properties(path, interface), let wanted = model.objects[path]?[interface]
                else {
                    fuzzProperty(false, "\(path) lost \(interface)")
                    return
                }
                fuzzProperty(
                    Set(properties.keys) == Set(wanted.keys) && Set(properties.keys).isSubset(of: keys),
                    "\(path) \(interface): keys \(properties.keys), expected \(wanted.keys.sorted())")
                for (key, value) in wanted {
                    fuzzProperty(
                        properties[key].map(normalized) == normalized(value),
                        "\(path) \(interface).\(key): \(properties[key].map { "\($0)" } ?? "nil"), expected \(value)")
                }
                // What the central reads of GATT objects (CentralManager+GATT.swift).
                _ = properties["UUID"]?.string.flatMap(BluetoothUUID.init)
                _ = CharacteristicProperties(bluezFlags: properties["Flags"]?.strings ?? [])
                _ = properties["MTU"]?.int ?? 23
                _ = properties["Roles"]?.strings
            }
        }
        _ = tree.adapter(matching: .first, role: "central")
        _ = tree.adapter(matching: .name("hci0"), role: "peripheral")
        _ = tree.adapter(matching: .address(BluetoothAddress(rawValue: 0xAABB_CCDD_EEFF)), role: "central")
    }

    /// What the central reads of a device, against what the model's properties say it should.
    static func check(_ device: DeviceObject, _ properties: [String: DBusValue], _ path: DBusObjectPath) {
        let address = properties["Address"]?.string.flatMap(BluetoothAddress.init)
        fuzzProperty(
            device.address == address,
            "\(path): address \(device.address.map { "\($0)" } ?? "nil"), expected \(address.map { "\($0)" } ?? "nil")")
        fuzzProperty(
            device.addressType
                == properties["AddressType"]?.string.flatMap(BluetoothAddress.AddressType.init(rawValue:)),
            "\(path): address type")
        fuzzProperty(device.name == properties["Name"]?.string, "\(path): name")
        fuzzProperty(device.isConnected == (properties["Connected"]?.bool == true), "\(path): connected")
        fuzzProperty(
            device.servicesResolved == (properties["ServicesResolved"]?.bool == true), "\(path): services resolved")
        fuzzProperty(device.hasRSSI == (properties["RSSI"] != nil), "\(path): RSSI presence")
        let rssi = properties["RSSI"]?.int.map { Int(Int16(clamping: $0)) }
        fuzzProperty(device.rssi == rssi, "\(path): RSSI \(device.rssi ?? -1), expected \(rssi ?? -1)")
        let power = properties["TxPower"]?.int.map { Int(Int16(clamping: $0)) }
        fuzzProperty(device.txPower == power, "\(path): TX power")
        var uuids: [BluetoothUUID] = []
        if case .array(let type, let elements)? = properties["UUIDs"]?.unwrapped,
            type == .string || type == .objectPath || type == .signature
        {
            for element in elements {
                let text: String? =
                    switch element {
                    case .string(let string): string
                    case .objectPath(let path): path.rawValue
                    case .signature(let signature): signature.description
                    default: nil
                    }
                if let uuid = text.flatMap(BluetoothUUID.init) { uuids.append(uuid) }
            }
        }
        fuzzProperty(device.serviceUUIDs == uuids, "\(path): UUIDs \(device.serviceUUIDs), expected \(uuids)")
        var expected = AdvertisementData(localName: properties["Name"]?.string, serviceUUIDs: uuids)
        for entry in properties["ManufacturerData"]?.entries ?? [] {
            guard let id = entry.key.uint16, let bytes = byteArray(entry.value) else { continue }
            expected.manufacturerData[id] = bytes
        }
        for entry in properties["ServiceData"]?.entries ?? [] {
            guard let uuid = entry.key.string.flatMap(BluetoothUUID.init), let bytes = byteArray(entry.value) else {
                continue
            }
            expected.serviceData[uuid] = bytes
        }
        if let power { expected.txPower = Int8(clamping: power) }
        if let rssi, rssi != 127 { expected.rssi = Int16(clamping: rssi) }
        fuzzProperty(
            device.advertisementData == expected,
            "\(path): advertisement \(device.advertisementData), expected \(expected)")
        fuzzProperty((device.peripheral != nil) == (address != nil), "\(path): a peripheral without an address")
    }

    static func byteArray(_ value: DBusValue) -> [UInt8]? {
        guard case .array(.byte, let elements) = value.unwrapped else { return nil }
        return elements.compactMap { if case .byte(let byte) = $0 { byte } else { nil } }
    }

    /// A value with every variant unwrapped, all the way down (the tree stores values without
    /// their variants and rebuilds data maps with one).
    static func normalized(_ value: DBusValue) -> String {
        switch value.unwrapped {
        case .array(let type, let elements): "a\(type)[" + elements.map(normalized).joined(separator: ",") + "]"
        case .dictionary(let key, _, let entries):
            "d\(key){" + entries.map { normalized($0.key) + ":" + normalized($0.value) }.joined(separator: ",") + "}"
        case .structure(let fields): "(" + fields.map(normalized).joined(separator: ",") + ")"
        case let other: "\(other)"
        }
    }

    /// Real shapes: what bluetoothd's GetManagedObjects, InterfacesAdded and PropertiesChanged
    /// carry for an adapter, a sensor device with manufacturer and service data, its GATT
    /// service, characteristic and descriptor, then the device's RSSI changing and its removal.
    static let seeds: [[UInt8]] = {
        var seeds: [[UInt8]] = []
        func path(_ text: String) -> UInt16 { UInt16(DBusValueGenerator.paths.firstIndex(of: text) ?? 0) }
        func name(_ text: String) -> UInt16 { UInt16(DBusValueGenerator.propertyNames.firstIndex(of: text) ?? 0) }
        func interface(_ text: String) -> UInt16 { UInt16(DBusValueGenerator.interfaces.firstIndex(of: text) ?? 0) }
        func string(_ text: String) -> UInt16 { UInt16(DBusValueGenerator.strings.firstIndex(of: text) ?? 0) }
        for variant in 0..<6 {
            var builder = FuzzInputBuilder()
            // InterfacesAdded of the adapter.
            builder.byte(variant & 1 == 0 ? 1 : 5)
            builder.uint16(path("/org/bluez/hci0"))
            builder.byte(1)  // not "any value"
            builder.byte(1)
            builder.uint16(interface("org.bluez.Adapter1"))
            builder.byte(2)
            builder.uint16(name("Address")); builder.byte(1); builder.uint16(string("A4:C1:38:00:00:10"))
            builder.uint16(name("Powered")); builder.byte(1); builder.byte(1)
            // InterfacesAdded of a device.
            builder.byte(variant & 2 == 0 ? 1 : 5)
            builder.uint16(path("/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF"))
            builder.byte(1)
            builder.byte(1)
            builder.uint16(interface("org.bluez.Device1"))
            builder.byte(6)
            builder.uint16(name("Address")); builder.byte(1); builder.uint16(string("AA:BB:CC:DD:EE:FF"))
            builder.uint16(name("RSSI")); builder.byte(1); builder.uint16(UInt16(bitPattern: -60))
            builder.uint16(name("Name")); builder.byte(1); builder.uint16(string("héllo\u{FFFE}"))
            builder.uint16(name("UUIDs")); builder.byte(1); builder.byte(2)
            builder.uint16(string("0000180f-0000-1000-8000-00805f9b34fb")); builder.uint16(string("not-a-uuid"))
            builder.uint16(name("ManufacturerData")); builder.byte(1); builder.byte(1)
            builder.uint16(0x0499); builder.byte(1); builder.byte(UInt8(variant)); builder.chunk([0x05, 0x12, 0xFC])
            builder.uint16(name("ServiceData")); builder.byte(1); builder.byte(1)
            builder.uint16(string("fcd2")); builder.byte(1); builder.byte(5); builder.chunk([0x40, 0x02, 0xCA, 0x09])
            // PropertiesChanged: RSSI as a string, then invalidated.
            builder.byte(variant & 4 == 0 ? 3 : 7)
            builder.byte(1)
            builder.uint16(name("RSSI"))
            builder.uint16(interface("org.bluez.Device1"))
            builder.byte(1)
            builder.uint16(name("RSSI")); builder.byte(0); builder.byte(9); builder.uint16(string("RSSI"))
            builder.uint16(path("/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF"))
            // A GATT characteristic below it, then the device goes (and its children with it).
            builder.byte(1)
            builder.uint16(path("/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF/service000a/char000b"))
            builder.byte(1)
            builder.byte(1)
            builder.uint16(interface("org.bluez.GattCharacteristic1"))
            builder.byte(3)
            builder.uint16(name("UUID")); builder.byte(1); builder.uint16(string("fcd2"))
            builder.uint16(name("Flags")); builder.byte(1); builder.byte(2); builder.uint16(string("read"));
            builder.uint16(string("notify"))
            builder.uint16(name("MTU")); builder.byte(1); builder.uint16(517)
            builder.byte(2)
            builder.byte(0)
            builder.uint16(interface("org.bluez.Device1"))
            builder.uint16(path("/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF"))
            seeds.append(builder.bytes)
        }
        return seeds
    }()
}
