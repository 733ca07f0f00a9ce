import BlueZSimulator
import DBus
import Foundation
import Synchronization
import TestSupport

/// The method calls an application received, in order (recorded by its exported handlers).
final class AppCalls: Sendable {
    private let mutex = Mutex<[DBusMessage]>([])

    func record(_ call: DBusMessage) { mutex.withLock { $0.append(call) } }

    var all: [DBusMessage] { mutex.withLock { $0 } }

    func calls(_ member: String, at path: String? = nil) -> [DBusMessage] {
        all.filter { $0.member == member && (path == nil || $0.path?.rawValue == path) }
    }

    /// Waits (polling every 5 ms) for a call matching `predicate`.
    @discardableResult
    func wait(for what: String, within seconds: Double = defaultWait, _ predicate: @Sendable (DBusMessage) -> Bool)
        async throws
        -> DBusMessage
    {
        if let match = try await poll(within: seconds, { all.first(where: predicate) }) { return match }
        throw HarnessTimeout(
            description: "no call \(what) within \(seconds) s; got:\n" + all.map(\.description).joined(separator: "\n"))
    }
}

/// A peripheral application written directly against the D-Bus export layer (not through the
/// BlueZ target's PeripheralManager): a GATT tree under `/app` and an advertisement at `/adv0`,
/// as a BlueZ application exports them, recording every call bluetoothd (the simulator) makes.
///
/// Tree (handles as the simulator lays them out after bluetoothd's GAP, GATT and DIS, 1…0x12):
/// - `/app/service0` `serviceUUID` (handle 0x0013)
///   - `char0` `…def1` read+notify, Value, ReadValue → "hello world" from the offset (0x0014/0x0015, CCCD 0x0016)
///     - `desc0` 0x2901 read → "Level" (0x0017)
///   - `char1` `…def2` write (0x0018/0x0019)
///   - `char2` `…def3` write-without-response, WriteValue answers NotPermitted (0x001a/0x001b)
///   - `char3` `…def4` read, answers org.bluez.Error.NotAuthorized (0x001c/0x001d)
struct TestPeripheral {
    let client: Client
    let calls = AppCalls()

    static let serviceUUID = "12345678-1234-5678-1234-56789abcdef0"
    static func characteristicUUID(_ index: Int) -> String { "12345678-1234-5678-1234-56789abcdef\(index + 1)" }
    static let gattCharacteristic = "org.bluez.GattCharacteristic1"
    static let options: DBusSignature = [.dictionary(key: .string, value: .variant)]

    var connection: DBusConnection { client.connection }

    /// Exports the application's ObjectManager and GATT objects under `root`.
    func exportApplication(root: String = "/app", extraFlag: String? = nil, serviceUUID: String = Self.serviceUUID)
        async throws
    {
        let calls = self.calls
        let rootPath = try DBusObjectPath(root)
        await connection.addObjectManager(at: rootPath)
        let service = try rootPath.appending("service0")
        try await connection.export(
            [
                DBusInterface(
                    "org.bluez.GattService1",
                    properties: [
                        DBusProperty("UUID", type: .string, value: .string(serviceUUID)),
                        DBusProperty("Primary", type: .boolean, value: true),
                        DBusProperty("Handle", type: .uint16, access: .readwrite, value: .uint16(0)),
                    ])
            ], at: service)
        func characteristic(
            _ index: Int, flags: [String], writeError: DBusError? = nil,
            read: (@Sendable (DBusMessage) throws -> [DBusValue])? = nil
        ) -> DBusInterface {
            DBusInterface(
                Self.gattCharacteristic,
                methods: [
                    .immediate("ReadValue", in: Self.options, out: [.array(.byte)]) { call in
                        calls.record(call)
                        return try read?(call) ?? [.bytes([])]
                    },
                    .immediate("WriteValue", in: [.array(.byte), .dictionary(key: .string, value: .variant)]) { call in
                        calls.record(call)
                        if let writeError { throw writeError }
                        return []
                    },
                    .immediate("StartNotify") { call in
                        calls.record(call)
                        return []
                    },
                    .immediate("StopNotify") { call in
                        calls.record(call)
                        return []
                    },
                ],
                properties: [
                    DBusProperty("UUID", type: .string, value: .string(Self.characteristicUUID(index))),
                    DBusProperty("Service", type: .objectPath, value: .objectPath(service)),
                    DBusProperty(
                        "Flags", type: .array(.string),
                        value: .strings(flags + (index == 0 ? extraFlag.map { [$0] } ?? [] : []))),
                    DBusProperty("Handle", type: .uint16, access: .readwrite, value: .uint16(0)),
                    DBusProperty("Value", type: .array(.byte), value: .bytes([])),
                ])
        }
        let char0 = try service.appending("char0")
        try await connection.export(
            [
                characteristic(0, flags: ["read", "notify"]) { call in
                    let offset = Int(call.arguments[0]["offset"]?.uint16 ?? 0)
                    return [.bytes(Array("hello world".utf8).dropFirst(offset))]
                }
            ], at: char0)
        try await connection.export(
            [
                DBusInterface(
                    "org.bluez.GattDescriptor1",
                    methods: [
                        .immediate("ReadValue", in: Self.options, out: [.array(.byte)]) { call in
                            calls.record(call)
                            return [.bytes(Array("Level".utf8))]
                        }
                    ],
                    properties: [
                        DBusProperty("UUID", type: .string, value: "00002901-0000-1000-8000-00805f9b34fb"),
                        DBusProperty("Characteristic", type: .objectPath, value: .objectPath(char0)),
                        DBusProperty("Flags", type: .array(.string), value: .strings(["read"])),
                        DBusProperty("Handle", type: .uint16, access: .readwrite, value: .uint16(0)),
                    ])
            ], at: try char0.appending("desc0"))
        try await connection.export([characteristic(1, flags: ["write"])], at: try service.appending("char1"))
        try await connection.export(
            [characteristic(2, flags: ["write-without-response"], writeError: BlueZError.notPermitted("refused"))],
            at: try service.appending("char2"))
        try await connection.export(
            [
                characteristic(3, flags: ["read"]) { _ in
                    throw DBusError(DBusError.Name("org.bluez.Error.NotAuthorized"), "Not authorized")
                }
            ], at: try service.appending("char3"))
    }

    /// Exports an `LEAdvertisement1` at `path` with `properties` (Release is recorded).
    func exportAdvertisement(at path: String = "/adv0", _ properties: [(String, DBusValue)]) async throws {
        let calls = self.calls
        try await connection.export(
            [
                DBusInterface(
                    "org.bluez.LEAdvertisement1",
                    methods: [
                        .immediate("Release") { call in
                            calls.record(call)
                            return []
                        }
                    ],
                    properties: properties.map { name, value in
                        DBusProperty(name, type: value.type, access: .readwrite, value: value)
                    })
            ],
            at: try DBusObjectPath(path))
    }

    /// The advertisement the linked-adapter tests use: connectable, the service UUID (128-bit),
    /// manufacturer data and TX power — 3 + 18 + 5 + 3 = 29 bytes.
    static let advertisement: [(String, DBusValue)] = [
        ("Type", .string("peripheral")),
        ("ServiceUUIDs", .strings([serviceUUID])),
        (
            "ManufacturerData",
            .dictionary(key: .uint16, value: .variant, [DBusDictionaryEntry(.uint16(0xFFFF), .variant(.bytes([0xAB])))])
        ),
        ("Includes", .strings(["tx-power"])),
        ("TxPower", .int16(4)),
    ]
    /// A second, non-connectable one: service data under 16-bit FFF0 and the name.
    static let broadcast: [(String, DBusValue)] = [
        ("Type", .string("broadcast")),
        (
            "ServiceData",
            .dictionary(
                key: .string, value: .variant, [DBusDictionaryEntry(.string("fff0"), .variant(.bytes([1, 2])))])
        ),
        ("LocalName", .string("gw-peripheral")),
    ]

    func registerApplication(_ adapter: String = "/org/bluez/hci1", root: String = "/app") async throws {
        try await client.call(
            adapter, "org.bluez.GattManager1", "RegisterApplication",
            [
                .objectPath(try DBusObjectPath(root)), Client.emptyOptions,
            ])
    }

    func registerAdvertisement(_ adapter: String = "/org/bluez/hci1", path: String = "/adv0") async throws {
        try await client.call(
            adapter, "org.bluez.LEAdvertisingManager1", "RegisterAdvertisement",
            [
                .objectPath(try DBusObjectPath(path)), Client.emptyOptions,
            ])
    }

    /// A property of the application's own object (e.g. the Handle bluetoothd wrote back).
    func property(_ name: String, _ interface: String, at path: String) async -> DBusValue? {
        guard let path = try? DBusObjectPath(path) else { return nil }
        return await connection.property(name, interface: interface, at: path)
    }
}

extension TestScenarios {
    /// Two adapters in range of each other; hci1 has two advertising instances.
    static let linked = """
        {
          \(timing),
          "adapters": [{"name": "hci0", "address": "00:AA:01:00:00:00"},
                       {"name": "hci1", "address": "00:AA:01:00:00:01", "advertising_instances": 2}],
          "links": [{"adapters": ["hci0", "hci1"], "rssi": -42, "interval": "20ms"}]
        }
        """
    /// hci1 as hci0 discovers it, and hci0 as hci1 sees it connected.
    static let peripheralOnCentral = "/org/bluez/hci0/dev_00_AA_01_00_00_01"
    static let centralOnPeripheral = "/org/bluez/hci1/dev_00_AA_01_00_00_00"
}
