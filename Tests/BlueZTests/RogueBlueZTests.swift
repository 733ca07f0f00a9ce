import BlueZ
import Bluetooth
import DBus
import FuzzTargets
import Retry
import Synchronization
import TestSupport
import Testing

/// A rogue `org.bluez` on a private bus — what a buggy or hostile bluetoothd, or anything that
/// owns the name on a misconfigured bus, can send — against a real ``CentralManager`` that
/// scans: a `GetManagedObjects` reply and a few hundred `InterfacesAdded`, `InterfacesRemoved`
/// and `PropertiesChanged` signals full of wrong types, huge arrays and odd paths (the
/// bluez-objects fuzz target's generator, fed by a seeded SplitMix64), then one well-formed
/// device. The central must stay responsive and report that device.
@Suite("a hostile org.bluez on the bus")
struct RogueBlueZTests {
    static let hci0 = DBusObjectPath(rawValue: "/org/bluez/hci0")!
    static let survivor = BluetoothAddress("A4:C1:38:00:00:99")!

    /// Fuzz input from a seeded generator.
    static func input(seed: UInt64, bytes: Int) -> FuzzInput {
        var random = SplitMix64(seed: seed)
        return FuzzInput((0..<bytes).map { _ in UInt8(truncatingIfNeeded: random.next()) })
    }

    static let interfaceMapType = DBusType.dictionary(key: .string, value: .dictionary(key: .string, value: .variant))

    /// The adapter the central needs, and hostile objects around it.
    static func managedObjects(_ input: inout FuzzInput, hostile: Int = 40) -> DBusValue {
        let adapter = DBusValue.dictionary(
            key: .string, value: .dictionary(key: .string, value: .variant),
            [
                DBusDictionaryEntry(
                    .string("org.bluez.Adapter1"),
                    .variantDictionary([
                        ("Address", .string("00:11:22:33:44:55")), ("Powered", .boolean(true)),
                        ("Roles", .strings(["central", "peripheral"])),
                    ]))
            ])
        var entries = [DBusDictionaryEntry(.objectPath(hci0), adapter)]
        for _ in 0..<hostile {
            // No second adapter: a powered one elsewhere (say at /org/bluez) is chosen instead of
            // hci0, rightly, and the devices of hci0 are then not this central's.
            guard case .dictionary(let key, let type, let interfaces) = DBusValueGenerator.interfaceMap(&input) else {
                continue
            }
            let value = DBusValue.dictionary(
                key: key, value: type, interfaces.filter { $0.key != .string("org.bluez.Adapter1") })
            let path = hostilePath(&input)
            // Only what can be sent: the reply is one message, and one value the encoder refuses
            // (a NUL in a string) would make it an error reply.
            guard value.type == interfaceMapType, (try? DBusMessage.wire([value])) != nil else { continue }
            entries.append(DBusDictionaryEntry(.objectPath(path), value))
        }
        return .dictionary(key: .objectPath, value: interfaceMapType, entries)
    }

    /// Any path but the adapter's own: a hostile `Powered: false` or a removed `Adapter1` there
    /// rightly stops the scan, which is not what this test is about.
    static func hostilePath(_ input: inout FuzzInput) -> DBusObjectPath {
        let path = DBusValueGenerator.path(&input)
        return path == hci0 ? DBusObjectPath(rawValue: "/org/bluez/hci0/dev_00_00_00_00_00_00")! : path
    }

    @Test(
        "a central scanning through hundreds of hostile objects and signals stays responsive and reports a well-formed device",
    )
    func hostileStream() async throws {
        let (objects, signals) = (40, 400)
        try await CentralHarness.run(nil) { harness in
            let rogue = try await harness.client()
            _ = try await rogue.requestName("org.bluez")
            var input = Self.input(seed: 0x6761_7474_7761_7921, bytes: 1 << 20)
            let reply = Self.managedObjects(&input, hostile: objects)
            let calls = Mutex(0)
            try await rogue.export(
                [
                    DBusInterface(
                        "org.freedesktop.DBus.ObjectManager",
                        methods: [
                            .immediate("GetManagedObjects", out: [Self.interfaceMapType.wrappedInManagedObjects]) { _ in
                                [reply]
                            }
                        ])
                ], at: .root, announce: false)
            try await rogue.export(
                [
                    DBusInterface(
                        "org.bluez.Adapter1",
                        methods: [
                            .immediate("SetDiscoveryFilter", in: [.dictionary(key: .string, value: .variant)]) { _ in
                                calls.withLock { $0 += 1 }
                                return []
                            },
                            .immediate("StartDiscovery") { _ in
                                calls.withLock { $0 += 1 }
                                return []
                            },
                            .immediate("StopDiscovery") { _ in [] },
                        ])
                ], at: Self.hci0, announce: false)
            let central = try await harness.central()
            try await central.waitUntilPoweredOn()
            let results = try await central.scan(ScanOptions(allowDuplicates: true))
            let seen = Mutex<[BluetoothAddress]>([])
            let scanning = Task {
                for await result in results { seen.withLock { $0.append(result.peripheral.address) } }
            }
            var sent = 0
            var refused = 0
            for index in 0..<signals {
                let path = Self.hostilePath(&input)
                let arguments: [DBusValue]
                let member: String
                let signalPath: DBusObjectPath
                switch index % 3 {
                case 0:
                    (member, signalPath) = ("InterfacesAdded", .root)
                    arguments = [.objectPath(path), DBusValueGenerator.interfaceMap(&input)]
                case 1:
                    (member, signalPath) = ("PropertiesChanged", path)
                    arguments = [
                        .string(DBusValueGenerator.interface(&input)), DBusValueGenerator.properties(&input),
                        .strings([DBusValueGenerator.propertyName(&input)]),
                    ]
                default:
                    (member, signalPath) = ("InterfacesRemoved", .root)
                    arguments = [.objectPath(path), .strings([DBusValueGenerator.interface(&input)])]
                }
                let interface =
                    member == "PropertiesChanged"
                    ? "org.freedesktop.DBus.Properties" : "org.freedesktop.DBus.ObjectManager"
                do {
                    try await rogue.emit(path: signalPath, interface: interface, member: member, arguments: arguments)
                    sent += 1
                } catch {
                    refused += 1  // values the encoder (or libdbus) refuses never reach the bus
                }
                if index % 50 == 49 { try await rogue.flush() }
            }
            #expect(sent >= signals * 3 / 4, "\(sent) hostile signals sent, \(refused) refused by the encoder")
            // Then a well-formed device: the central must still see it.
            try await rogue.emit(
                path: .root, interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesAdded",
                arguments: [
                    .objectPath(try Self.hci0.appending(Self.survivor.bluezPathComponent)),
                    .dictionary(
                        key: .string, value: .dictionary(key: .string, value: .variant),
                        [
                            DBusDictionaryEntry(
                                .string("org.bluez.Device1"),
                                .variantDictionary([
                                    ("Address", .string(Self.survivor.description)), ("AddressType", .string("public")),
                                    ("Name", .string("survivor")), ("RSSI", .int16(-50)),
                                ]))
                        ]),
                ])
            try await rogue.flush()
            try await eventually("the well-formed device is reported", within: 10) {
                seen.withLock { $0.contains(Self.survivor) }
            }
            #expect(await central.state == .poweredOn)
            #expect(calls.withLock { $0 } >= 1, "the central armed discovery on the rogue adapter")
            scanning.cancel()
            await central.close()
        }
    }
}

extension DBusType {
    /// `a{o<self>}`: a `GetManagedObjects` reply whose values are `self`.
    fileprivate var wrappedInManagedObjects: DBusType { .dictionary(key: .objectPath, value: self) }
}
