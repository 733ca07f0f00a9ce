import Bluetooth
import DBus
import Testing

@testable import BlueZ

/// The compact `Device1` record reads exactly what the generic property list read (the readers'
/// old conversions are the reference here), through every kind of update.
@Suite("BlueZ device record")
struct DeviceObjectTests {
    static let adapter = DBusObjectPath(rawValue: "/org/bluez/hci0")!
    static let path = DBusObjectPath(rawValue: "/org/bluez/hci0/dev_C4_7C_8D_6A_00_01")!

    /// What the readers made of a generic property list before the compact record.
    struct Reading: Equatable {
        var peripheral: Peripheral?
        var peripheralFields: String
        var data: AdvertisementData
        var hasRSSI: Bool
        var rssi: Int?
        var uuids: [BluetoothUUID]

        init(_ props: PropertyList) {
            let address = props["Address"]?.string.flatMap(BluetoothAddress.init)
            peripheral = address.map { address in
                Peripheral(
                    address: address,
                    addressType: props["AddressType"]?.string.flatMap(BluetoothAddress.AddressType.init(rawValue:)),
                    name: props["Name"]?.string, isConnected: props["Connected"]?.bool ?? false,
                    servicesResolved: props["ServicesResolved"]?.bool ?? false)
            }
            peripheralFields = Self.fields(peripheral)
            var data = AdvertisementData()
            data.localName = props["Name"]?.string
            data.serviceUUIDs = (props["UUIDs"]?.strings ?? []).compactMap(BluetoothUUID.init)
            for entry in props.byteEntries("ManufacturerData") {
                guard let id = entry.key.uint16 else { continue }
                data.manufacturerData[id] = entry.bytes
            }
            for entry in props.byteEntries("ServiceData") {
                guard let uuid = entry.key.string.flatMap(BluetoothUUID.init) else { continue }
                data.serviceData[uuid] = entry.bytes
            }
            if let power = props["TxPower"]?.int { data.txPower = Int8(clamping: power) }
            if let rssi = props["RSSI"]?.int, rssi != 127 { data.rssi = Int16(clamping: rssi) }
            self.data = data
            hasRSSI = props["RSSI"] != nil
            rssi = props["RSSI"]?.int
            uuids = data.serviceUUIDs
        }

        init(_ device: DeviceObject) {
            peripheral = device.peripheral
            peripheralFields = Self.fields(peripheral)
            data = device.advertisementData
            hasRSSI = device.hasRSSI
            rssi = device.rssi
            uuids = device.serviceUUIDs
        }

        /// Peripheral's equality is the address alone.
        static func fields(_ peripheral: Peripheral?) -> String {
            guard let p = peripheral else { return "none" }
            return
                "\(p.address) \(String(describing: p.addressType)) \(p.name ?? "-") \(p.isConnected) \(p.servicesResolved)"
        }
    }

    static func entries(_ pairs: [(String, DBusValue)]) -> [DBusDictionaryEntry] {
        pairs.map { DBusDictionaryEntry(.string($0.0), .variant($0.1)) }
    }

    static func manufacturer(_ pairs: [(UInt16, [UInt8])]) -> DBusValue {
        .dictionary(
            key: .uint16, value: .variant, pairs.map { DBusDictionaryEntry(.uint16($0.0), .variant(.bytes($0.1))) })
    }

    static func service(_ pairs: [(String, [UInt8])]) -> DBusValue {
        .dictionary(
            key: .string, value: .variant, pairs.map { DBusDictionaryEntry(.string($0.0), .variant(.bytes($0.1))) })
    }

    static let full: [(String, DBusValue)] = [
        ("Address", .string("C4:7C:8D:6A:00:01")), ("AddressType", .string("random")),
        ("Name", .string("A name over fifteen bytes")),
        ("Connected", .boolean(true)), ("ServicesResolved", .boolean(true)), ("RSSI", .int16(-71)),
        ("TxPower", .int16(-200)),
        (
            "UUIDs",
            .strings([
                "0000fcd2-0000-1000-8000-00805f9b34fb", "not a uuid", "12345678-0000-1000-8000-00805f9b34fb",
                "6E400001-B5A3-F393-E0A9-E50E24DCCA9E", "0000180f-0000-1000-8000-00805f9b34fb", "180F",
            ])
        ),
        (
            "ManufacturerData",
            manufacturer([
                (0x0499, Array(0..<24)), (0xFFFF, []), (0x004C, Array(repeating: 7, count: 300)), (0x0499, [1]),
            ])
        ),
        (
            "ServiceData",
            service([
                ("0000fcd2-0000-1000-8000-00805f9b34fb", [0x40, 0x01, 0x64]), ("bad", [1]),
                ("6e400001-b5a3-f393-e0a9-e50e24dcca9e", Array(0..<130)), ("12345678-0000-1000-8000-00805f9b34fb", []),
            ])
        ),
        ("Alias", .string("ignored")), ("AdvertisingFlags", .bytes([6])),
    ]

    /// Applies the same change to both and checks they still read alike.
    static func expectSame(
        _ props: inout PropertyList, _ device: inout DeviceObject, changed: [String: DBusValue] = [:],
        invalidated: [String] = [],
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        for (key, value) in changed where DeviceObject.keys.contains(key) { props[key] = value }
        for key in invalidated { props.removeValue(forKey: key) }
        device.change(changed, invalidated: invalidated)
        #expect(Reading(device) == Reading(props), sourceLocation: sourceLocation)
    }

    @Test("every kept property reads back as the generic list read it, odd values included")
    func roundTrip() throws {
        let props = PropertyList(Self.entries(Self.full), keeping: DeviceObject.keys)
        let device = DeviceObject(Self.entries(Self.full))
        #expect(Reading(device) == Reading(props))
        let data = device.advertisementData
        #expect(device.address == BluetoothAddress("C4:7C:8D:6A:00:01") && device.addressType == .random)
        #expect(device.name == "A name over fifteen bytes" && device.isConnected && device.servicesResolved)
        #expect(data.rssi == -71 && data.txPower == -128)
        #expect(
            data.serviceUUIDs == [
                BluetoothUUID(0xFCD2), BluetoothUUID(bits32: 0x1234_5678),
                BluetoothUUID("6e400001-b5a3-f393-e0a9-e50e24dcca9e")!,
                BluetoothUUID(0x180F), BluetoothUUID(0x180F),
            ])
        #expect(data.manufacturerData == [0x0499: [1], 0xFFFF: [], 0x004C: Array(repeating: 7, count: 300)])
        #expect(
            data.serviceData.count == 3
                && data.serviceData[BluetoothUUID("6e400001-b5a3-f393-e0a9-e50e24dcca9e")!] == Array(0..<130))
        // An empty device, and odd types: RSSI present but not an integer, 127, a bad address.
        #expect(Reading(DeviceObject([])) == Reading(PropertyList([], keeping: DeviceObject.keys)))
        let odd: [(String, DBusValue)] = [
            ("Address", .string("C4-7C")), ("AddressType", .string("other")), ("RSSI", .string("strong")),
            ("TxPower", .uint64(.max)),
            ("Connected", .string("yes")), ("UUIDs", .array(.int32, [.int32(1)])),
            ("ManufacturerData", .bytes([1, 2])),
            (
                "ServiceData",
                .dictionary(
                    key: .string, value: .variant,
                    [
                        DBusDictionaryEntry(
                            .string("0000fcd2-0000-1000-8000-00805f9b34fb"), .variant(.string("no bytes")))
                    ])
            ),
        ]
        let oddDevice = DeviceObject(Self.entries(odd))
        #expect(Reading(oddDevice) == Reading(PropertyList(Self.entries(odd), keeping: DeviceObject.keys)))
        #expect(
            oddDevice.hasRSSI && oddDevice.rssi == nil && oddDevice.peripheral == nil && oddDevice.payloadCount == 0)
        let unavailable = DeviceObject(
            Self.entries([("Address", .string("C4:7C:8D:6A:00:01")), ("RSSI", .int16(127))]))
        #expect(unavailable.hasRSSI && unavailable.rssi == 127 && unavailable.advertisementData.rssi == nil)
    }

    @Test("updates and invalidations of each property, in place or resized, keep the other parts")
    func updates() {
        var props = PropertyList(Self.entries(Self.full), keeping: DeviceObject.keys)
        var device = DeviceObject(Self.entries(Self.full))
        let fcd2 = "0000fcd2-0000-1000-8000-00805f9b34fb"
        // Same length: written in place.
        let before = device.payloadCount
        Self.expectSame(
            &props, &device, changed: ["ServiceData": Self.service([(fcd2, [0x40, 0x01, 0x63])]), "RSSI": .int16(-60)])
        #expect(device.payloadCount < before)
        let sized = device.payloadCount
        Self.expectSame(
            &props, &device, changed: ["ServiceData": .variant(Self.service([(fcd2, [0x40, 0x01, 0x62])]))])
        #expect(device.payloadCount == sized)
        // Growing and shrinking each section, several at once.
        Self.expectSame(&props, &device, changed: ["UUIDs": .strings(["0000181a-0000-1000-8000-00805f9b34fb"])])
        Self.expectSame(&props, &device, changed: ["ManufacturerData": Self.manufacturer([(0x0001, [9, 9, 9, 9, 9])])])
        Self.expectSame(
            &props, &device,
            changed: [
                "ManufacturerData": Self.manufacturer([]), "ServiceData": Self.service([(fcd2, Array(0..<200))]),
                "UUIDs": .strings([]),
            ])
        Self.expectSame(&props, &device, changed: ["UUIDs": .strings([fcd2, fcd2])])
        // More than the encoder's first scratch space (256 bytes): encoded again at its size.
        let many = (0..<40).map { "6e40\(10 + $0)01-b5a3-f393-e0a9-e50e24dcca9e" }
        Self.expectSame(
            &props, &device,
            changed: ["ServiceData": Self.service([(fcd2, Array(repeating: 7, count: 300))]), "UUIDs": .strings(many)])
        #expect(device.payloadCount > 900)
        Self.expectSame(&props, &device, changed: ["UUIDs": .strings([fcd2, fcd2])])
        // Scalars.
        Self.expectSame(
            &props, &device,
            changed: [
                "Name": .string("short"), "Connected": .boolean(false), "ServicesResolved": .boolean(false),
                "AddressType": .string("public"), "TxPower": .int16(8), "Address": .string("C4:7C:8D:6A:00:02"),
            ])
        // Invalidation: RSSI and TxPower when discovery stops, and every other property.
        Self.expectSame(&props, &device, invalidated: ["RSSI", "TxPower"])
        #expect(!device.hasRSSI && device.advertisementData.rssi == nil)
        Self.expectSame(&props, &device, invalidated: ["ServiceData"])
        #expect(device.advertisementData.serviceUUIDs == [BluetoothUUID(0xFCD2), BluetoothUUID(0xFCD2)])
        Self.expectSame(&props, &device, changed: ["RSSI": .int16(-90)], invalidated: ["UUIDs", "Name", "Alias"])
        Self.expectSame(
            &props, &device,
            invalidated: ["Address", "AddressType", "Connected", "ServicesResolved", "ManufacturerData", "RSSI"])
        #expect(device.payloadCount == 0 && device.peripheral == nil)
    }

    @Test(
        "service data keys and UUIDs parse as BluetoothUUID parses them, BlueZ's spelling by the fast path",
        arguments: [
            "0000181a-0000-1000-8000-00805f9b34fb", "0000181A-0000-1000-8000-00805F9B34FB",
            "6e400001-b5a3-f393-e0a9-e50e24dcca9e",
            "0000181a00001000800000805f9b34fb", "181A", "0000181a", "0000181a-0000-1000-8000-00805f9b34f",
            "0000181a-0000-1000-8000-00805f9b34fbb",
            "0000181a-00001-000-8000-00805f9b34fb", "0000181a_0000-1000-8000-00805f9b34fb",
            "0000181g-0000-1000-8000-00805f9b34fb",
            "0000181a-0000-1000-8000-00805f9b34f\u{e9}", "0000181a-0000-1000-8000-00805f9b34\u{e9}",
            "-0000181a-0000-1000-8000-00805f9b34f",
            "", "------------------------------------",
        ])
    func uuidParsing(text: String) {
        #expect(Payload.parseUUID(text) == BluetoothUUID(text))
    }

    @Test("a copy is not changed by a change of the original")
    func valueSemantics() {
        var device = DeviceObject(Self.entries(Self.full))
        let copy = device
        device.change(
            [
                "RSSI": .int16(-20),
                "ServiceData": Self.service([("0000fcd2-0000-1000-8000-00805f9b34fb", [0x40, 0x01, 0x00])]),
            ],
            invalidated: [])
        #expect(copy.rssi == -71 && device.rssi == -20)
        #expect(copy.advertisementData.serviceData[BluetoothUUID(0xFCD2)] == [0x40, 0x01, 0x64])
        #expect(device.advertisementData.serviceData[BluetoothUUID(0xFCD2)] == [0x40, 0x01, 0x00])
    }

    @Test("device paths: BlueZ's form is keyed without its string and rebuilt exactly; any other path works too")
    func paths() throws {
        var tree = BlueZObjectTree()
        let interfaces: DBusValue = .dictionary(
            key: .string, value: .dictionary(key: .string, value: .variant),
            [
                DBusDictionaryEntry(
                    .string("org.bluez.Device1"), .variantDictionary([("Address", .string("C4:7C:8D:6A:00:01"))]))
            ])
        let odd = [
            "/org/bluez/hci0/dev_c4_7c_8d_6a_00_01", "/org/bluez/hci0/dev_C4_7C_8D_6A_00_0",
            "/org/bluez/hci0/devXC4_7C_8D_6A_00_01",
            "/dev_C4_7C_8D_6A_00_01", "/org/bluez/hci1/dev_C4_7C_8D_6A_00_01", "/org/bluez/hci0/device",
            "/org/bluez/hci0/xdev_C4_7C_8D_6A_00_01",
        ].map { DBusObjectPath(rawValue: $0)! }
        for path in [Self.path] + odd { tree.add(path, interfaces: interfaces) }
        let all = ([Self.path] + odd).sorted()
        #expect(tree.paths(with: BlueZObjectTree.device) == all)
        #expect(
            tree.paths(with: BlueZObjectTree.device, below: Self.adapter) == all.filter { $0.parent == Self.adapter })
        #expect(tree.count == all.count)
        #expect(tree.deviceCount(below: Self.adapter) == all.filter { $0.rawValue.hasPrefix("/org/bluez/hci0/") }.count)
        #expect(tree.deviceCount(below: DBusObjectPath(rawValue: "/org/bluez")!) == all.count - 1)
        for path in all { #expect(tree.device(path)?.address == BluetoothAddress("C4:7C:8D:6A:00:01")) }
        #expect(tree.device(DBusObjectPath(rawValue: "/org/bluez/hci2/dev_C4_7C_8D_6A_00_01")!) == nil)
        #expect(tree.device(DBusObjectPath(rawValue: "/org/bluez/hci0/dev_C4_7C_8D_6A_00_02")!) == nil)
        // Keys: compact for BlueZ's form, distinct per adapter.
        let key0 = tree.devices.key(Self.path)
        let key1 = tree.devices.key(DBusObjectPath(rawValue: "/org/bluez/hci1/dev_C4_7C_8D_6A_00_01")!)
        guard case .compact = key0, case .compact = key1 else { Issue.record("not compact: \(key0) \(key1)"); return }
        #expect(key0 != key1 && tree.devices.path(key0) == Self.path)
        // A GATT object under a device, an adapter with its devices.
        let service = DBusObjectPath(rawValue: Self.path.rawValue + "/service0010")!
        tree.add(
            service,
            interfaces: .dictionary(
                key: .string, value: .dictionary(key: .string, value: .variant),
                [
                    DBusDictionaryEntry(
                        .string("org.bluez.GattService1"),
                        .variantDictionary([("UUID", .string("0000180f-0000-1000-8000-00805f9b34fb"))]))
                ]))
        #expect(tree.count == all.count + 1 && tree.contains(service))
        tree.remove(Self.path, interfaces: ["org.bluez.Device1"])
        #expect(!tree.contains(service) && !tree.contains(Self.path) && !tree.devices.contains(key0))
        tree.add(
            Self.adapter,
            interfaces: .dictionary(
                key: .string, value: .dictionary(key: .string, value: .variant),
                [
                    DBusDictionaryEntry(
                        .string("org.bluez.Adapter1"), .variantDictionary([("Powered", .boolean(true))]))
                ]))
        tree.remove(Self.adapter, interfaces: ["org.bluez.Adapter1"])
        #expect(tree.paths(with: BlueZObjectTree.device) == all.filter { !$0.rawValue.hasPrefix("/org/bluez/hci0/") })
        // After a reload the same key means the same path again.
        tree.load(
            .dictionary(
                key: .objectPath, value: .dictionary(key: .string, value: .dictionary(key: .string, value: .variant)),
                [
                    DBusDictionaryEntry(.objectPath(Self.path), interfaces)
                ]))
        #expect(tree.devices.key(Self.path) == key0 && tree.devices.contains(key0) && tree.count == 1)
    }
}
