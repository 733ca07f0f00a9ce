import Bluetooth
import DBus
import Testing

@testable import BlueZ

/// What the central keeps of BlueZ's objects: the properties it reads, nothing else, and nothing
/// of an object once BlueZ removes it.
@Suite("BlueZ object tree")
struct ObjectTreeTests {
    static let device = DBusObjectPath(rawValue: "/org/bluez/hci0/dev_A4_C1_38_00_00_01")!
    static let characteristic = DBusObjectPath(rawValue: "/org/bluez/hci0/dev_A4_C1_38_00_00_01/service0010/char0011")!

    /// `InterfacesAdded`'s second argument for one device as bluetoothd 5.66 sends it.
    static let deviceInterfaces: DBusValue = .dictionary(
        key: .string, value: .dictionary(key: .string, value: .variant),
        [
            DBusDictionaryEntry(
                .string("org.freedesktop.DBus.Introspectable"), .variantDictionary([String: DBusValue]())),
            DBusDictionaryEntry(
                .string("org.bluez.Device1"),
                .variantDictionary([
                    ("Address", .string("A4:C1:38:00:00:01")), ("AddressType", .string("public")),
                    ("Name", .string("Battery Sensor")),
                    ("Alias", .string("Battery Sensor")), ("Paired", .boolean(false)), ("Bonded", .boolean(false)),
                    ("Trusted", .boolean(false)), ("Blocked", .boolean(false)), ("LegacyPairing", .boolean(false)),
                    ("RSSI", .int16(-58)), ("TxPower", .int16(4)), ("Connected", .boolean(false)),
                    ("UUIDs", .strings(["0000180f-0000-1000-8000-00805f9b34fb"])),
                    ("Adapter", .objectPath(DBusObjectPath(rawValue: "/org/bluez/hci0")!)),
                    (
                        "ManufacturerData",
                        .dictionary(
                            key: .uint16, value: .variant,
                            [DBusDictionaryEntry(.uint16(0xFFFF), .variant(.bytes([0x52, 0x42])))])
                    ),
                    (
                        "ServiceData",
                        .dictionary(
                            key: .string, value: .variant,
                            [
                                DBusDictionaryEntry(
                                    .string("0000180f-0000-1000-8000-00805f9b34fb"), .variant(.bytes([0x64])))
                            ])
                    ),
                    ("ServicesResolved", .boolean(false)), ("AdvertisingFlags", .bytes([0x06])),
                ])),
            DBusDictionaryEntry(.string("org.freedesktop.DBus.Properties"), .variantDictionary([String: DBusValue]())),
        ])

    @Test(
        "only /org/bluez/<name> objects are adapters: a powered Adapter1 claimed at /org/bluez or below a device is passed over"
    )
    func adapterPaths() throws {
        func adapter(powered: Bool) -> DBusValue {
            .dictionary(
                key: .string, value: .dictionary(key: .string, value: .variant),
                [
                    DBusDictionaryEntry(
                        .string(BlueZObjectTree.adapter),
                        .variantDictionary([
                            ("Address", .string("00:AA:01:00:00:00")), ("Powered", .boolean(powered)),
                            ("Roles", .strings(["central"])),
                        ]))
                ])
        }
        var tree = BlueZObjectTree()
        tree.add(DBusObjectPath(rawValue: "/org/bluez")!, interfaces: adapter(powered: true))
        tree.add(DBusObjectPath(rawValue: "/org/bluez/hci0/dev_A4_C1_38_00_00_01")!, interfaces: adapter(powered: true))
        tree.add(DBusObjectPath(rawValue: "/org/bluez/hci0")!, interfaces: adapter(powered: false))
        #expect(tree.adapter(matching: .first, role: "central")?.rawValue == "/org/bluez/hci0")
        #expect(
            tree.adapter(matching: .address(try #require(BluetoothAddress("00:AA:01:00:00:00"))), role: "central")?
                .rawValue
                == "/org/bluez/hci0")
    }

    @Test("a device keeps the ten properties the central reads; Alias, Paired, Adapter, AdvertisingFlags… are dropped")
    func keepsWhatTheCentralReads() throws {
        var tree = BlueZObjectTree()
        let added = tree.add(Self.device, interfaces: Self.deviceInterfaces)
        #expect(added == ["org.bluez.Device1"])
        let device = try #require(tree.device(Self.device))
        #expect(device.address == BluetoothAddress("A4:C1:38:00:00:01"))
        #expect(device.addressType == .public)
        #expect(!device.isConnected && !device.servicesResolved && device.hasRSSI)
        #expect(tree.properties(Self.device, BlueZObjectTree.device) == nil)  // devices are read with device(_:)
        let data = device.advertisementData
        #expect(data.localName == "Battery Sensor")
        #expect(data.manufacturerData == [0xFFFF: [0x52, 0x42]])
        #expect(data.serviceData == [BluetoothUUID(0x180F): [0x64]])
        #expect(data.txPower == 4 && data.rssi == -58)
        #expect(data.serviceUUIDs == [BluetoothUUID(0x180F)])
        #expect(tree.paths(with: BlueZObjectTree.device) == [Self.device])
        #expect(tree.count == 1 && tree.contains(Self.device))
    }

    @Test("PropertiesChanged applies the kept properties, ignores the others and invalidates")
    func changes() throws {
        var tree = BlueZObjectTree()
        tree.add(Self.device, interfaces: Self.deviceInterfaces)
        let applied = tree.change(
            Self.device, interface: BlueZObjectTree.device,
            changed: [
                "Alias": .variant(.string("Kitchen")), "Trusted": .variant(.boolean(true)),
                "RSSI": .variant(.int16(-70)),
                "Connected": .variant(.boolean(true)),
            ],
            invalidated: ["TxPower", "Icon"])
        #expect(applied)
        let device = try #require(tree.device(Self.device))
        #expect(device.rssi == -70)
        #expect(device.isConnected)
        #expect(device.txPower == nil)
        #expect(device.name == "Battery Sensor")
        // Unknown objects and interfaces are not created by a change.
        let unknownObject = tree.change(
            Self.characteristic, interface: BlueZObjectTree.characteristic, changed: ["Value": .bytes([1])],
            invalidated: [])
        let unknownInterface = tree.change(
            Self.device, interface: "org.bluez.Battery1", changed: ["Percentage": .byte(90)], invalidated: [])
        let unknownDevice = tree.change(
            DBusObjectPath(rawValue: "/org/bluez/hci0/dev_A4_C1_38_00_00_02")!, interface: BlueZObjectTree.device,
            changed: ["RSSI": .int16(-40)], invalidated: [])
        #expect(!unknownObject && !unknownInterface && !unknownDevice)
        #expect(tree.count == 1)
    }

    @Test("a PropertiesChanged's changes read as the dictionary DBusValue.dictionary makes of them")
    func propertyChanges() throws {
        let values: [DBusValue] = [
            .variantDictionary([("RSSI", .int16(-60)), ("ServiceData", .bytes([1])), ("RSSI", .int16(-50))]),
            .dictionary(
                key: .objectPath, value: .variant, [DBusDictionaryEntry(.objectPath(Self.device), .variant(.int16(1)))]),
            .dictionary(
                key: .signature, value: .variant, [DBusDictionaryEntry(.signature([.string]), .variant(.int16(2)))]),
            .dictionary(
                key: .string, value: .variant, [DBusDictionaryEntry(.variant(.string("RSSI")), .variant(.int16(3)))]),
            .dictionary(key: .uint16, value: .variant, [DBusDictionaryEntry(.uint16(1), .variant(.int16(4)))]),
            .variant(.variantDictionary([("Connected", .boolean(true))])),
            .strings(["RSSI"]),
            .int16(5),
        ]
        let names = ["RSSI", "ServiceData", "Connected", Self.device.rawValue, "s", "Name"]
        for value in values {
            let changes = PropertyChanges(value)
            let dictionary = value.dictionary ?? [:]
            for name in names { #expect(changes[name] == dictionary[name], "\(value): \(name)") }
            var applied: [String: DBusValue] = [:]
            changes.forEach { name, value in applied[name] = value }
            #expect(applied == dictionary, "\(value)")
            #expect(
                changes.contains(anyOf: CentralManager.advertisementKeys)
                    == CentralManager.advertisementKeys.contains { dictionary[$0] != nil })
        }
        var changes = PropertyChanges(values[0])
        changes["Connected"] = .boolean(true)
        changes["RSSI"] = nil
        #expect(
            changes["Connected"] == .boolean(true) && changes["RSSI"] == nil
                && changes["ServiceData"] == .variant(.bytes([1])))
        #expect(changes.contains(anyOf: ["ServiceData"]) && !changes.contains(anyOf: ["RSSI", "Name"]))
    }

    @Test("removing a device removes its GATT objects; nothing is left behind")
    func removal() {
        var tree = BlueZObjectTree()
        tree.add(Self.device, interfaces: Self.deviceInterfaces)
        tree.add(
            Self.characteristic,
            interfaces: .dictionary(
                key: .string, value: .dictionary(key: .string, value: .variant),
                [
                    DBusDictionaryEntry(
                        .string("org.bluez.GattCharacteristic1"),
                        .variantDictionary([
                            ("UUID", .string("00002a19-0000-1000-8000-00805f9b34fb")),
                            ("Flags", .strings(["read", "notify"])),
                            ("Value", .bytes([94])), ("Notifying", .boolean(false)),
                        ]))
                ]))
        #expect(tree.properties(Self.characteristic, BlueZObjectTree.characteristic)?.keys == ["UUID", "Flags"])
        tree.remove(Self.device, interfaces: ["org.freedesktop.DBus.Properties", "org.bluez.Device1"])
        #expect(tree.count == 0)
    }

    /// `GetManagedObjects`' reply for one object: `a{oa{sa{sv}}}`.
    static func snapshot(_ objects: [(DBusObjectPath, DBusValue)]) -> DBusValue {
        .dictionary(
            key: .objectPath, value: .dictionary(key: .string, value: .dictionary(key: .string, value: .variant)),
            objects.map { DBusDictionaryEntry(.objectPath($0.0), $0.1) })
    }

    static let adapterPath = DBusObjectPath(rawValue: "/org/bluez/hci0")!
    static let adapterInterfaces: DBusValue = .dictionary(
        key: .string, value: .dictionary(key: .string, value: .variant),
        [
            DBusDictionaryEntry(
                .string(BlueZObjectTree.adapter),
                .variantDictionary([
                    ("Address", .string("00:AA:01:00:00:00")), ("Powered", .boolean(false)),
                    ("Roles", .strings(["central", "peripheral"])),
                ]))
        ])

    /// A tree holding the device, with a snapshot requested.
    static func awaitingSnapshot() -> BlueZObjectTree {
        var tree = BlueZObjectTree()
        tree.add(device, interfaces: deviceInterfaces)
        tree.beginSnapshot()
        return tree
    }

    @Test(
        "a GetManagedObjects snapshot made before a signal handled first does not undo it: the adapter bluetoothd registered after its reply, a ServicesResolved, a removal"
    )
    func olderSnapshotKeepsNewerSignals() throws {
        var tree = Self.awaitingSnapshot()
        // Handled while the reply was on its way; the reply was made before any of them.
        tree.add(Self.adapterPath, interfaces: Self.adapterInterfaces)
        tree.change(
            Self.adapterPath, interface: BlueZObjectTree.adapter, changed: ["Powered": .variant(.boolean(true))],
            invalidated: [])
        tree.change(
            Self.device, interface: BlueZObjectTree.device,
            changed: ["Connected": .variant(.boolean(true)), "ServicesResolved": .variant(.boolean(true))],
            invalidated: [])
        let gone = DBusObjectPath(rawValue: "/org/bluez/hci0/dev_A4_C1_38_00_00_02")!
        tree.remove(gone, interfaces: [BlueZObjectTree.device])
        let other: DBusValue = .dictionary(
            key: .string, value: .dictionary(key: .string, value: .variant),
            [
                DBusDictionaryEntry(
                    .string(BlueZObjectTree.device),
                    .variantDictionary([("Address", .string("A4:C1:38:00:00:02")), ("AddressType", .string("public"))]))
            ])
        // The snapshot: no adapter yet, the device not connected, the other device still there.
        let complete = tree.load(Self.snapshot([(Self.device, Self.deviceInterfaces), (gone, other)]))
        #expect(complete)
        #expect(tree.adapter(matching: .first, role: "central") == Self.adapterPath)
        #expect(tree.properties(Self.adapterPath, BlueZObjectTree.adapter)?["Powered"]?.bool == true)
        let device = try #require(tree.device(Self.device))
        #expect(device.isConnected && device.servicesResolved)
        #expect(tree.device(gone) == nil)
        // Without a snapshot awaited, a load replaces everything (nothing is recorded).
        tree.add(Self.adapterPath, interfaces: Self.adapterInterfaces)
        tree.load(Self.snapshot([(Self.device, Self.deviceInterfaces)]))
        #expect(tree.adapter(matching: .first, role: "central") == nil)
        #expect(tree.device(Self.device)?.isConnected == false)
    }

    @Test(
        "the journal kept while a snapshot is awaited is bounded: past its limit it is given up and load says the snapshot may be stale; endSnapshot stops recording"
    )
    func journalBounded() throws {
        var tree = Self.awaitingSnapshot()
        for rssi in 0...BlueZObjectTree.journalLimit {
            tree.change(
                Self.device, interface: BlueZObjectTree.device,
                changed: ["RSSI": .variant(.int16(Int16(-40 - rssi % 50)))], invalidated: [])
        }
        let stale = tree.load(Self.snapshot([(Self.device, Self.deviceInterfaces)]))
        #expect(!stale)
        // The next snapshot starts a fresh journal.
        tree.beginSnapshot()
        tree.add(Self.adapterPath, interfaces: Self.adapterInterfaces)
        let fresh = tree.load(Self.snapshot([]))
        #expect(fresh)
        #expect(tree.adapter(matching: .first, role: "central") == Self.adapterPath)
        // A call that failed: nothing recorded any more.
        tree.beginSnapshot()
        tree.endSnapshot()
        tree.add(Self.device, interfaces: Self.deviceInterfaces)
        let afterFailure = tree.load(Self.snapshot([]))
        #expect(afterFailure)
        #expect(tree.device(Self.device) == nil)
    }
}
