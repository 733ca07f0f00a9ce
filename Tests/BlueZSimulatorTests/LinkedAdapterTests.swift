import BlueZSimulator
import DBus
import Foundation
import Testing

/// hci1 runs the test's application (GATT tree + advertisements); a central client on hci0
/// discovers, connects and uses it, as in the real-BlueZ lane's `btvirt -l2`.
@Suite("Simulator linked adapters: an application on one adapter, a central on the other")
struct LinkedAdapterTests {
    static let remote = S.peripheralOnCentral
    static let service = remote + "/service0013"
    static let readable = service + "/char0014"
    static let writable = service + "/char0018"
    static let command = service + "/char001a"
    static let refusing = service + "/char001c"
    static let userDescription = readable + "/desc0017"

    /// Registers the application and both advertisements on hci1, then discovers hci1 from hci0
    /// with a filter on the service UUID and connects. Returns the central and its signal log.
    static func connected(_ harness: SimulatorHarness, _ app: TestPeripheral) async throws -> (Client, SignalLog) {
        try await app.exportApplication()
        try await app.exportAdvertisement(TestPeripheral.advertisement)
        try await app.exportAdvertisement(at: "/adv1", TestPeripheral.broadcast)
        try await app.registerApplication()
        try await app.registerAdvertisement()
        try await app.registerAdvertisement(path: "/adv1")
        let central = try await harness.client()
        let log = try await central.signals()
        try await central.call(
            "/org/bluez/hci0", Client.adapter, "SetDiscoveryFilter",
            [
                .variantDictionary(["UUIDs": .strings([TestPeripheral.serviceUUID]), "Transport": .string("le")])
            ])
        try await central.call("/org/bluez/hci0", Client.adapter, "StartDiscovery")
        try await log.wait(for: "hci1 discovered") { $0.isInterfacesAdded(remote) }
        try await central.call(remote, Client.device, "Connect")
        try await log.wait(for: "ServicesResolved") {
            $0.isPropertiesChanged(remote, Client.device) && $0.changed["ServicesResolved"]?.bool == true
        }
        return (central, log)
    }

    @Test(
        "discovery: the advertisements of hci1 make a Device1 on hci0 with their UUID, data, name, TX power and the link's RSSI"
    )
    func discovery() async throws {
        try await SimulatorHarness.run(S.linked) { harness in
            let app = TestPeripheral(client: try await harness.client())
            try await app.exportAdvertisement(TestPeripheral.advertisement)
            try await app.exportAdvertisement(at: "/adv1", TestPeripheral.broadcast)
            try await app.registerAdvertisement()
            try await app.registerAdvertisement(path: "/adv1")
            let central = try await harness.client()
            let log = try await central.signals()
            try await central.call(
                "/org/bluez/hci0", Client.adapter, "SetDiscoveryFilter",
                [
                    .variantDictionary(["UUIDs": .strings([TestPeripheral.serviceUUID])])
                ])
            try await central.call("/org/bluez/hci0", Client.adapter, "StartDiscovery")
            let added = try await log.wait(for: "hci1 discovered") { $0.isInterfacesAdded(Self.remote) }
            let device = added.arguments[1].dictionary?["org.bluez.Device1"]?.dictionary ?? [:]
            #expect(device["Address"]?.string == "00:AA:01:00:00:01")
            #expect(device["AddressType"]?.string == "public")
            #expect(device["RSSI"]?.int16 == -42)
            #expect(device["UUIDs"]?.strings == [TestPeripheral.serviceUUID])
            #expect(device["TxPower"]?.int16 == 4)
            #expect(Self.manufacturer(device) == [0xAB])
            // The broadcast (not matching the UUID filter on its own) merges in while the
            // device is known: the filter admits reports of the device carrying the UUID only,
            // so the name and service data come from a scan that admits both.
            #expect(try await central.get("/org/bluez/hci0", Client.adapter, "Discovering")?.bool == true)
            try await central.call(
                "/org/bluez/hci0", Client.adapter, "SetDiscoveryFilter",
                [.variantDictionary(["Transport": .string("le")])])
            try await eventually("name and service data of the second advertisement") {
                let name = try? await central.get(Self.remote, Client.device, "Name")
                let data = try? await central.get(Self.remote, Client.device, "ServiceData")
                return name?.string == "gw-peripheral"
                    && data?.dictionary?["0000fff0-0000-1000-8000-00805f9b34fb"]?.bytes == [1, 2]
            }
            // The application changes its advertisement: bluetoothd refreshes the data.
            try await app.connection.setProperties(
                [
                    "ServiceData": .dictionary(
                        key: .string, value: .variant, [DBusDictionaryEntry(.string("fff0"), .variant(.bytes([9])))])
                ],
                interface: "org.bluez.LEAdvertisement1", at: "/adv1")
            try await log.wait(for: "ServiceData refreshed") {
                $0.isPropertiesChanged(Self.remote, Client.device)
                    && $0.changed["ServiceData"]?.dictionary?["0000fff0-0000-1000-8000-00805f9b34fb"]?.bytes == [9]
            }
        }
    }

    static func manufacturer(_ device: [String: DBusValue]) -> [UInt8]? {
        guard case .dictionary(_, _, let entries)? = device["ManufacturerData"]?.unwrapped else { return nil }
        return entries.first { $0.key == .uint16(0xFFFF) }?.value.bytes
    }

    @Test(
        "connect: the application's services as remote GATT objects; the central connected on hci1; read and write reach the application with bluetoothd's options"
    )
    func connectReadWrite() async throws {
        try await SimulatorHarness.run(S.linked) { harness in
            let app = TestPeripheral(client: try await harness.client())
            let (central, log) = try await Self.connected(harness, app)
            let objects = try await central.managedObjects()
            #expect(objects[Self.service]?["org.bluez.GattService1"]?["UUID"]?.string == TestPeripheral.serviceUUID)
            #expect(objects[Self.readable]?["org.bluez.GattCharacteristic1"]?["Flags"]?.strings == ["read", "notify"])
            #expect(
                objects[Self.readable + "/desc0016"]?["org.bluez.GattDescriptor1"]?["UUID"]?.string
                    == "00002902-0000-1000-8000-00805f9b34fb")
            #expect(
                objects[Self.userDescription]?["org.bluez.GattDescriptor1"]?["UUID"]?.string
                    == "00002901-0000-1000-8000-00805f9b34fb")
            #expect(
                objects[Self.command]?["org.bluez.GattCharacteristic1"]?["Flags"]?.strings == ["write-without-response"]
            )
            #expect(objects[S.peripheralOnCentral + "/service0001"] == nil, "GAP stays hidden")
            // bluetoothd's own services as a BlueZ peer shows them: GATT with its four characteristics, DIS.
            #expect(
                objects[Self.remote + "/service0006/char000c"]?["org.bluez.GattCharacteristic1"]?["UUID"]?.string
                    == "00002b2a-0000-1000-8000-00805f9b34fb")
            #expect(
                objects[Self.remote + "/service0010"]?["org.bluez.GattService1"]?["UUID"]?.string
                    == "0000180a-0000-1000-8000-00805f9b34fb")
            // hci1 sees hci0 connected.
            try await eventually("the central's Device1 on hci1 is connected") {
                try await central.get(S.centralOnPeripheral, Client.device, "Connected")?.bool == true
            }

            let value = try await central.call(Self.readable, Client.characteristic, "ReadValue", [Client.emptyOptions])
            #expect(value.first?.bytes == Array("hello world".utf8))
            let read = try #require(app.calls.calls("ReadValue", at: "/app/service0/char0").first)
            let options = read.arguments[0]
            #expect(options["device"]?.objectPath?.rawValue == S.centralOnPeripheral)
            #expect(options["mtu"]?.uint16 == 517)
            #expect(options["link"]?.string == "LE")
            #expect(options["offset"] == nil && options["type"] == nil)
            let tail = try await central.call(
                Self.readable, Client.characteristic, "ReadValue", [.variantDictionary(["offset": .uint16(6)])])
            #expect(tail.first?.bytes == Array("world".utf8))
            #expect(app.calls.calls("ReadValue", at: "/app/service0/char0").last?.arguments[0]["offset"]?.uint16 == 6)
            try await log.wait(for: "Value after the read") {
                $0.isPropertiesChanged(Self.readable, Client.characteristic)
                    && $0.changed["Value"]?.bytes == Array("hello world".utf8)
            }

            let description = try await central.call(
                Self.userDescription, Client.descriptor, "ReadValue", [Client.emptyOptions])
            #expect(description.first?.bytes == Array("Level".utf8))

            try await central.call(
                Self.writable, Client.characteristic, "WriteValue",
                [.bytes([1, 2, 3]), .variantDictionary(["type": .string("request")])])
            let write = try #require(app.calls.calls("WriteValue", at: "/app/service0/char1").first)
            #expect(write.arguments[0].bytes == [1, 2, 3])
            #expect(
                write.arguments[1]["type"] == nil
                    && write.arguments[1]["device"]?.objectPath?.rawValue == S.centralOnPeripheral)

            try await central.call(
                Self.command, Client.characteristic, "WriteValue",
                [.bytes([7]), .variantDictionary(["type": .string("command")])])
            let command = try await app.calls.wait(for: "write command") {
                $0.member == "WriteValue" && $0.path == "/app/service0/char2"
            }
            #expect(command.arguments[0].bytes == [7])
            #expect(command.arguments[1]["type"] == nil && command.arguments[1]["mtu"]?.uint16 == 517)

            // A request to a write-without-response characteristic is acknowledged at once:
            // bluetoothd ignores the application's answer (here NotPermitted).
            try await central.call(
                Self.command, Client.characteristic, "WriteValue",
                [.bytes([8]), .variantDictionary(["type": .string("request")])])
            try await app.calls.wait(for: "the request reached the app too") {
                $0.member == "WriteValue" && $0.path == "/app/service0/char2" && $0.arguments[0].bytes == [8]
            }

            // The application answers NotAuthorized: ATT 0x08, which the central's bluetoothd reports as NotAuthorized.
            await #expect {
                try await central.call(Self.refusing, Client.characteristic, "ReadValue", [Client.emptyOptions])
            } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.NotAuthorized", "Operation Not Authorized")
            }
            // A characteristic without the read flag is refused by bluetoothd itself (0x02).
            await #expect {
                try await central.call(Self.writable, Client.characteristic, "ReadValue", [Client.emptyOptions])
            } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.NotPermitted", "Read not permitted")
            }
            #expect(app.calls.calls("ReadValue", at: "/app/service0/char1").isEmpty)
        }
    }

    @Test(
        "notify round trip: StartNotify reaches the application, its Value changes reach the central, StopNotify when the last subscriber stops"
    )
    func notifications() async throws {
        try await SimulatorHarness.run(S.linked) { harness in
            let app = TestPeripheral(client: try await harness.client())
            let (central, log) = try await Self.connected(harness, app)
            try await central.call(Self.readable, Client.characteristic, "StartNotify")
            try await app.calls.wait(for: "StartNotify") {
                $0.member == "StartNotify" && $0.path == "/app/service0/char0"
            }
            let second = try await harness.client()
            // The same central link: the CCCD is already on.
            try await second.call(Self.readable, Client.characteristic, "StartNotify")
            for byte: UInt8 in [5, 6] {
                try await app.connection.setProperties(
                    ["Value": .bytes([byte])], interface: TestPeripheral.gattCharacteristic, at: "/app/service0/char0")
                try await log.wait(for: "notification \(byte)") {
                    $0.isPropertiesChanged(Self.readable, Client.characteristic) && $0.changed["Value"]?.bytes == [byte]
                }
            }
            #expect(app.calls.calls("StartNotify").count == 1, "one central link, one CCCD")
            try await central.call(Self.readable, Client.characteristic, "StopNotify")
            try await Task.sleep(for: .milliseconds(30))
            #expect(app.calls.calls("StopNotify").isEmpty, "another client of the central still listens")
            await second.close()
            try await app.calls.wait(for: "StopNotify") {
                $0.member == "StopNotify" && $0.path == "/app/service0/char0"
            }

            // AcquireNotify on the central: the CCCD is enabled again, values arrive as datagrams.
            let reply = try await central.call(
                Self.readable, Client.characteristic, "AcquireNotify", [Client.emptyOptions])
            let fd = try #require(reply.first?.unixFD)
            try await eventually("StartNotify again") { app.calls.calls("StartNotify").count == 2 }
            try await app.connection.setProperties(
                ["Value": .bytes([0x42])], interface: TestPeripheral.gattCharacteristic, at: "/app/service0/char0")
            // Non-blocking reads: the datagram is sent by tasks that need the cooperative pool,
            // so a blocking read here could starve it.
            var datagram: [UInt8] = []
            try await eventually("the notification datagram") {
                var buffer = [UInt8](repeating: 0, count: 16)
                let count = buffer.withUnsafeMutableBytes {
                    recv(fd.fileDescriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT))
                }
                if count > 0 { datagram = Array(buffer.prefix(count)) }
                return count > 0
            }
            #expect(datagram == [0x42])
        }
    }

    @Test(
        "disconnect from either side brings both down; the application leaving the bus takes its services and advertisements away"
    )
    func disconnects() async throws {
        try await SimulatorHarness.run(S.linked) { harness in
            let app = TestPeripheral(client: try await harness.client())
            let (central, log) = try await Self.connected(harness, app)
            try await central.call(Self.readable, Client.characteristic, "StartNotify")
            try await app.calls.wait(for: "StartNotify") { $0.member == "StartNotify" }
            // From the peripheral side.
            try await central.call(S.centralOnPeripheral, Client.device, "Disconnect")
            try await log.wait(for: "central side down") {
                $0.isPropertiesChanged(Self.remote, Client.device) && $0.changed["Connected"]?.bool == false
            }
            try await app.calls.wait(for: "StopNotify when the link went down") { $0.member == "StopNotify" }
            // Again, from the central side.
            try await central.call(Self.remote, Client.device, "Connect")
            // (Its Device1 on hci1 may have timed out meanwhile and come back: read the property.)
            try await eventually("peripheral side up") {
                (try? await central.get(S.centralOnPeripheral, Client.device, "Connected"))??.bool == true
            }
            try await central.call(Self.remote, Client.device, "Disconnect")
            try await eventually("peripheral side down") {
                (try? await central.get(S.centralOnPeripheral, Client.device, "Connected"))??.bool != true
            }
            #expect(try await central.get(Self.remote, Client.device, "Connected")?.bool == false)
            // Connected again, the application leaves: its services go from the central's view.
            try await central.call(Self.remote, Client.device, "Connect")
            try await eventually("resolved again") {
                try await central.get(Self.remote, Client.device, "ServicesResolved")?.bool == true
            }
            await app.client.close()
            try await log.wait(for: "the service object removed") {
                $0.member == "InterfacesRemoved" && $0.arguments.first?.objectPath?.rawValue == Self.service
            }
            try await eventually("no advertisement left on hci1") {
                try await central.get("/org/bluez/hci1", "org.bluez.LEAdvertisingManager1", "ActiveInstances")?.uint8
                    == 0
            }
        }
    }

    @Test("a bluetoothd restart drops the application and its advertisements; the central's link drops")
    func restart() async throws {
        try await SimulatorHarness.run(S.linked) { harness in
            let app = TestPeripheral(client: try await harness.client())
            let (central, _) = try await Self.connected(harness, app)
            let first = await harness.simulator.uniqueName
            await harness.simulator.crash(restartAfter: 0.05)
            try await eventually("org.bluez back") {
                let owner = try await central.connection.nameOwner("org.bluez")
                return owner != nil && owner != first
            }
            #expect(
                try await central.get("/org/bluez/hci1", "org.bluez.LEAdvertisingManager1", "ActiveInstances")?.uint8
                    == 0)
            let objects = try await central.managedObjects()
            #expect(objects[Self.remote] == nil && objects[S.centralOnPeripheral] == nil)
            await #expect {
                try await app.client.call(
                    "/org/bluez/hci1", "org.bluez.LEAdvertisingManager1", "UnregisterAdvertisement",
                    [.objectPath("/adv0")])
            } throws: {
                ($0 as? DBusError)?.name.rawValue == "org.bluez.Error.DoesNotExist"
            }
            // Registering again brings it back for a new scan.
            try await app.registerApplication()
            try await app.registerAdvertisement()
            let log = try await central.signals()
            try await central.call(
                "/org/bluez/hci0", Client.adapter, "SetDiscoveryFilter",
                [.variantDictionary(["UUIDs": .strings([TestPeripheral.serviceUUID])])])
            try await central.call("/org/bluez/hci0", Client.adapter, "StartDiscovery")
            try await log.wait(for: "hci1 discovered after the restart") { $0.isInterfacesAdded(Self.remote) }
        }
    }
}
