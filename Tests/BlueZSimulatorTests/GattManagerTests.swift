import BlueZSimulator
import DBus
import Foundation
import Testing

@Suite("Simulator GattManager1: RegisterApplication as bluetoothd 5.66 answers it")
struct GattManagerTests {
    static let manager = "org.bluez.GattManager1"

    @Test(
        "registration reads the tree from the caller, writes allocated handles back before the reply; AlreadyExists, Unregister, DoesNotExist"
    )
    func registers() async throws {
        try await SimulatorHarness.run(S.linked) { harness in
            let app = TestPeripheral(client: try await harness.client())
            try await app.exportApplication()
            let objects = try await app.client.managedObjects()
            let adapter = objects["/org/bluez/hci1"]?.dictionary ?? [:]
            #expect(adapter["org.bluez.GattManager1"] != nil && adapter["org.bluez.LEAdvertisingManager1"] != nil)

            // The reply needs our GetManagedObjects answer on the same connection; it arrives
            // with the handles already set (the Set calls precede the reply on the bus).
            try await app.registerApplication()
            #expect(await app.property("Handle", "org.bluez.GattService1", at: "/app/service0") == .uint16(0x0013))
            #expect(
                await app.property("Handle", TestPeripheral.gattCharacteristic, at: "/app/service0/char0")
                    == .uint16(0x0015))
            #expect(
                await app.property("Handle", "org.bluez.GattDescriptor1", at: "/app/service0/char0/desc0")
                    == .uint16(0x0017))
            #expect(
                await app.property("Handle", TestPeripheral.gattCharacteristic, at: "/app/service0/char3")
                    == .uint16(0x001D))

            await #expect { try await app.registerApplication() } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.AlreadyExists", "Already Exists")
            }
            // Another connection may register the same path: registrations belong to the sender.
            let other = TestPeripheral(client: try await harness.client())
            try await other.exportApplication()
            try await other.registerApplication()
            #expect(await other.property("Handle", "org.bluez.GattService1", at: "/app/service0") == .uint16(0x001E))

            try await app.client.call("/org/bluez/hci1", Self.manager, "UnregisterApplication", [.objectPath("/app")])
            await #expect {
                try await app.client.call(
                    "/org/bluez/hci1", Self.manager, "UnregisterApplication", [.objectPath("/app")])
            } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.DoesNotExist", "Does Not Exist")
            }
            // Registered on hci1 only.
            await #expect {
                try await other.client.call(
                    "/org/bluez/hci0", Self.manager, "UnregisterApplication", [.objectPath("/app")])
            } throws: {
                ($0 as? DBusError)?.name.rawValue == "org.bluez.Error.DoesNotExist"
            }
            await #expect {
                try await app.client.call(
                    "/org/bluez/hci1", Self.manager, "RegisterApplication", [.string("/app"), Client.emptyOptions])
            } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.InvalidArguments", "Invalid arguments in method call")
            }
        }
    }

    @Test(
        "refusals: empty tree, unknown flag, a parent that is not in the tree, GAP/GATT service, no answer from the app"
    )
    func refusals() async throws {
        try await SimulatorHarness.run(S.linked) { harness in
            let client = try await harness.client()
            let app = TestPeripheral(client: client)
            await client.connection.addObjectManager(at: "/empty")
            try await client.connection.export([DBusInterface("org.example.Other")], at: "/empty/thing")
            await #expect { try await app.registerApplication(root: "/empty") } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.Failed", "No object received")
            }
            try await app.exportApplication(root: "/flag", extraFlag: "sparkly")
            await #expect { try await app.registerApplication(root: "/flag") } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.Failed", "No valid service object found")
            }
            try await app.exportApplication(root: "/gap", serviceUUID: "1800")
            await #expect { try await app.registerApplication(root: "/gap") } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.Failed", "Failed to create entry in database")
            }
            // A characteristic whose service is outside the registered root.
            await client.connection.addObjectManager(at: "/orphan")
            try await client.connection.export(
                [
                    DBusInterface(
                        TestPeripheral.gattCharacteristic,
                        properties: [
                            DBusProperty("UUID", type: .string, value: "2a19"),
                            DBusProperty("Service", type: .objectPath, value: .objectPath("/elsewhere/service0")),
                            DBusProperty("Flags", type: .array(.string), value: .strings(["read"])),
                        ])
                ], at: "/orphan/char0")
            await #expect { try await app.registerApplication(root: "/orphan") } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.Failed", "No valid service object found")
            }
            // No ObjectManager at the root: the GetManagedObjects call fails.
            await #expect { try await app.registerApplication(root: "/nothing") } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.Failed", "No object received")
            }
            // Refused registrations leave nothing behind: the same root registers once fixed.
            try await app.exportApplication(root: "/later")
            try await app.registerApplication(root: "/later")
        }
    }

    @Test("the application removing its objects (InterfacesRemoved under the root) unregisters it")
    func leavingUnregisters() async throws {
        try await SimulatorHarness.run(S.linked) { harness in
            let app = TestPeripheral(client: try await harness.client())
            try await app.exportApplication()
            try await app.registerApplication()
            try await app.client.connection.unexport(at: "/app/service0/char3")  // InterfacesRemoved under the root
            try await eventually("unregistered after InterfacesRemoved") {
                do {
                    try await app.client.call(
                        "/org/bluez/hci1", Self.manager, "UnregisterApplication", [.objectPath("/app")])
                    return false
                } catch let error as DBusError where error.name.rawValue == "org.bluez.Error.DoesNotExist" {
                    return true
                }
            }
        }
    }

    @Test("a bluetoothd restart drops registrations: the application must register again")
    func restartDropsRegistration() async throws {
        try await SimulatorHarness.run(S.linked) { harness in
            let app = TestPeripheral(client: try await harness.client())
            try await app.exportApplication()
            try await app.registerApplication()
            let first = await harness.simulator.uniqueName
            await harness.simulator.crash(restartAfter: 0.05)
            try await eventually("org.bluez back with a new owner") {
                let owner = try await app.connection.nameOwner("org.bluez")
                return owner != nil && owner != first
            }
            await #expect {
                try await app.client.call(
                    "/org/bluez/hci1", Self.manager, "UnregisterApplication", [.objectPath("/app")])
            } throws: {
                ($0 as? DBusError)?.name.rawValue == "org.bluez.Error.DoesNotExist"
            }
            try await app.registerApplication()
        }
    }
}
