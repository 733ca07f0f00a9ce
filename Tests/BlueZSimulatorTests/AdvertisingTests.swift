import BlueZSimulator
import Bluetooth
import DBus
import Foundation
import Testing

@Suite("Simulator LEAdvertisingManager1: registration, the 31-byte legacy payload, instances, Release")
struct AdvertisingTests {
    static let manager = "org.bluez.LEAdvertisingManager1"

    static func data(_ properties: [String: DBusValue]) throws -> LEAdvertisementData {
        try LEAdvertisementData(properties: properties)
    }

    @Test("payload length: flags, UUIDs in their shortest form, manufacturer and service data, appearance, TX power")
    func lengths() throws {
        let uuid128 = "12345678-1234-5678-1234-56789abcdef0"
        // Flags 3 + one 128-bit UUID list 18 = 21; manufacturer data with 6 bytes: 4 + 6 = 10 → 31.
        var properties: [String: DBusValue] = [
            "Type": "peripheral", "ServiceUUIDs": .strings([uuid128]),
            "ManufacturerData": .dictionary(
                key: .uint16, value: .variant,
                [DBusDictionaryEntry(.uint16(0xFFFF), .variant(.bytes([1, 2, 3, 4, 5, 6])))]),
        ]
        #expect(try Self.data(properties).lengthWithoutName == 31)
        #expect(try Self.data(properties).fits)
        properties["ManufacturerData"] = .dictionary(
            key: .uint16, value: .variant,
            [DBusDictionaryEntry(.uint16(0xFFFF), .variant(.bytes([1, 2, 3, 4, 5, 6, 7])))])
        #expect(try !Self.data(properties).fits)
        // 16-bit UUIDs share one list: 2 + 2·3; a broadcast has no flags; service data under a 16-bit UUID 2 + 2 + n.
        let short = try Self.data([
            "Type": "broadcast", "ServiceUUIDs": .strings(["180f", "180a", "0000181a-0000-1000-8000-00805f9b34fb"]),
            "ServiceData": .dictionary(
                key: .string, value: .variant, [DBusDictionaryEntry(.string("fcd2"), .variant(.bytes([0x40, 1, 2])))]),
            "Includes": .strings(["tx-power", "appearance", "rsi"]), "Appearance": .uint16(0x00C0),
        ])
        #expect(short.includes == ["tx-power", "appearance"])
        #expect(short.lengthWithoutName == 8 + 7 + 3 + 4)
        // The name fills the room left: complete, shortened, or left out.
        let named = try Self.data(["Type": "peripheral", "LocalName": "Kitchen sensor"])
        #expect(named.nameOnAir(adapterAlias: "x")?.complete == true)
        #expect(named.length(adapterAlias: "x") == 3 + 2 + 14)
        var long = properties
        // 3 + 18 + an empty manufacturer data entry 4 = 25: room for a 4-byte name (AD type 0x08).
        long["ManufacturerData"] = .dictionary(
            key: .uint16, value: .variant, [DBusDictionaryEntry(.uint16(1), .variant(.bytes([])))])
        long["LocalName"] = "A very long peripheral name"
        let shortened = try #require(try Self.data(long).nameOnAir(adapterAlias: "x"))
        #expect(!shortened.complete && shortened.name == "A ve")
        #expect(try Self.data(long).length(adapterAlias: "x") == 31)
        // "local-name" includes the adapter's alias when there is no LocalName.
        #expect(
            try Self.data(["Type": "broadcast", "Includes": .strings(["local-name"])]).nameOnAir(adapterAlias: "gw")?
                .name == "gw")
    }

    @Test("bad properties are refused")
    func badProperties() {
        #expect(throws: AdvertisementProblem.self) { try Self.data([:]) }
        #expect(throws: AdvertisementProblem.self) { try Self.data(["Type": "beacon"]) }
        #expect(throws: AdvertisementProblem.self) { try Self.data(["Type": "broadcast", "Discoverable": true]) }
        #expect(throws: AdvertisementProblem.self) {
            try Self.data(["Type": "peripheral", "ServiceUUIDs": .strings(["nope"])])
        }
        #expect(throws: AdvertisementProblem.self) {
            try Self.data(["Type": "peripheral", "MinInterval": .uint32(200), "MaxInterval": .uint32(100)])
        }
        #expect(throws: AdvertisementProblem.self) { try Self.data(["Type": "peripheral", "LocalName": .int32(1)]) }
    }

    @Test(
        "register, AlreadyExists, too long, bad Type, Maximum advertisements reached, Unregister without Release, instances"
    )
    func registration() async throws {
        try await SimulatorHarness.run(S.linked) { harness in
            let app = TestPeripheral(client: try await harness.client())
            let log = try await app.client.signals()
            #expect(try await app.client.get("/org/bluez/hci1", Self.manager, "SupportedInstances") == .byte(2))
            #expect(
                try await app.client.get("/org/bluez/hci1", Self.manager, "SupportedIncludes")?.strings == [
                    "tx-power", "appearance", "local-name",
                ])
            try await app.exportAdvertisement(TestPeripheral.advertisement)
            try await app.registerAdvertisement()
            try await log.wait(for: "ActiveInstances=1") {
                $0.isPropertiesChanged("/org/bluez/hci1", Self.manager) && $0.changed["ActiveInstances"]?.uint8 == 1
                    && $0.changed["SupportedInstances"]?.uint8 == 1
            }
            await #expect { try await app.registerAdvertisement() } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.AlreadyExists", "Already Exists")
            }
            // 3 + 18 + manufacturer data 4 + 7 = 32 bytes.
            try await app.exportAdvertisement(
                at: "/long",
                [
                    ("Type", "peripheral"), ("ServiceUUIDs", .strings([TestPeripheral.serviceUUID])),
                    (
                        "ManufacturerData",
                        .dictionary(
                            key: .uint16, value: .variant,
                            [DBusDictionaryEntry(.uint16(0xFFFF), .variant(.bytes([1, 2, 3, 4, 5, 6, 7])))])
                    ),
                ])
            await #expect { try await app.registerAdvertisement(path: "/long") } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.Failed", "Failed to parse advertisement.")
            }
            try await app.exportAdvertisement(at: "/badtype", [("Type", "beacon")])
            await #expect { try await app.registerAdvertisement(path: "/badtype") } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.Failed", "Failed to parse advertisement.")
            }
            try await app.exportAdvertisement(
                at: "/adv1",
                [
                    ("Type", "broadcast"),
                    (
                        "ServiceData",
                        .dictionary(
                            key: .string, value: .variant,
                            [DBusDictionaryEntry(.string("fcd2"), .variant(.bytes([0x40])))])
                    ),
                ])
            try await app.registerAdvertisement(path: "/adv1")
            try await app.exportAdvertisement(at: "/adv2", [("Type", "broadcast")])
            await #expect { try await app.registerAdvertisement(path: "/adv2") } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.NotPermitted", "Maximum advertisements reached")
            }
            #expect(try await app.client.get("/org/bluez/hci1", Self.manager, "ActiveInstances") == .byte(2))
            #expect(try await app.client.get("/org/bluez/hci0", Self.manager, "ActiveInstances") == .byte(0))
            try await app.client.call(
                "/org/bluez/hci1", Self.manager, "UnregisterAdvertisement", [.objectPath("/adv1")])
            await #expect {
                try await app.client.call(
                    "/org/bluez/hci1", Self.manager, "UnregisterAdvertisement", [.objectPath("/adv1")])
            } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.DoesNotExist", "Does Not Exist")
            }
            try await app.registerAdvertisement(path: "/adv2")
            try await Task.sleep(for: .milliseconds(50))
            #expect(app.calls.calls("Release").isEmpty, "UnregisterAdvertisement does not call Release")
        }
    }

    @Test("Release: after Timeout and at power-off; the application leaving the bus frees its instances")
    func release() async throws {
        try await SimulatorHarness.run(S.linked) { harness in
            let app = TestPeripheral(client: try await harness.client())
            try await app.exportAdvertisement([("Type", "peripheral"), ("Timeout", .uint16(1))])
            try await app.exportAdvertisement(at: "/adv1", [("Type", "peripheral")])
            try await app.registerAdvertisement()
            try await app.registerAdvertisement(path: "/adv1")
            try await app.calls.wait(for: "Release of /adv0 after its 1 s Timeout") {
                $0.member == "Release" && $0.path == "/adv0"
            }
            #expect(app.calls.calls("Release", at: "/adv1").isEmpty)
            #expect(try await app.client.get("/org/bluez/hci1", Self.manager, "ActiveInstances") == .byte(1))
            try await app.client.call(
                "/org/bluez/hci1", "org.freedesktop.DBus.Properties", "Set",
                [
                    .string("org.bluez.Adapter1"), .string("Powered"), .variant(.boolean(false)),
                ])
            try await app.calls.wait(for: "Release of /adv1 at power-off") {
                $0.member == "Release" && $0.path == "/adv1"
            }
            try await eventually("no instance active after power-off") {
                try await app.client.get("/org/bluez/hci1", Self.manager, "ActiveInstances") == .byte(0)
            }
            await #expect { try await app.registerAdvertisement(path: "/adv1") } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.Failed", "Failed to register advertisement")
            }
            try await app.client.call(
                "/org/bluez/hci1", "org.freedesktop.DBus.Properties", "Set",
                [
                    .string("org.bluez.Adapter1"), .string("Powered"), .variant(.boolean(true)),
                ])
            try await app.registerAdvertisement(path: "/adv1")
            let observer = try await harness.client()
            await app.client.close()
            try await eventually("the departed application's instance is free again") {
                try await observer.get("/org/bluez/hci1", Self.manager, "ActiveInstances") == .byte(0)
            }
        }
    }
}
