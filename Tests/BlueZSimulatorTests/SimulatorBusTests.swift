import BlueZSimulator
import DBus
import Foundation
import Testing

typealias S = TestScenarios

@Suite("Simulator over D-Bus: objects, discovery, connections, GATT (what a BlueZ client observes)")
struct SimulatorBusTests {
    let service = S.battery + "/service000a"
    var level: String { service + "/char000b" }
    var lampWrite: String { S.battery + "/service000f/char0010" }
    var lampState: String { S.battery + "/service000f/char0012" }

    @Test("the tree: ObjectManager at /, Adapter1 with BlueZ's properties, standard interfaces listed")
    func tree() async throws {
        try await SimulatorHarness.run(S.sensors) { harness in
            let client = try await harness.client()
            let objects = try await client.managedObjects()
            #expect(objects.keys.sorted() == ["/org/bluez", "/org/bluez/hci0", "/io/gattway/Simulator"].sorted())
            let adapter = objects["/org/bluez/hci0"]?.dictionary ?? [:]
            #expect(
                adapter.keys.sorted() == [
                    "org.bluez.Adapter1", "org.bluez.GattManager1", "org.bluez.LEAdvertisingManager1",
                    "org.freedesktop.DBus.Introspectable", "org.freedesktop.DBus.Properties",
                ])
            let properties = adapter["org.bluez.Adapter1"]?.dictionary ?? [:]
            #expect(properties["Address"]?.string == "00:AA:01:00:00:00")
            #expect(properties["Powered"]?.bool == true)
            #expect(properties["Discovering"]?.bool == false)
            #expect(properties["Roles"]?.strings?.contains("central") == true)
            let filters = try await client.call("/org/bluez/hci0", Client.adapter, "GetDiscoveryFilters")
            #expect(
                filters.first?.strings == [
                    "UUIDs", "RSSI", "Pathloss", "Transport", "DuplicateData", "Discoverable", "Pattern",
                ])
            await #expect { try await client.get("/org/bluez/hci0", Client.adapter, "Nope") } throws: {
                ($0 as? DBusError)?.name == .invalidArgs
            }
        }
    }

    @Test("discovery errors and Discovering: InProgress, foreign stop, Discovering after the reply, filter kept")
    func discoveryErrors() async throws {
        try await SimulatorHarness.run(S.sensors) { harness in
            let a = try await harness.client()
            let b = try await harness.client()
            let log = try await a.signals()
            try await a.call("/org/bluez/hci0", Client.adapter, "StartDiscovery")
            await #expect { try await a.call("/org/bluez/hci0", Client.adapter, "StartDiscovery") } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.InProgress", "Operation already in progress")
            }
            await #expect { try await b.call("/org/bluez/hci0", Client.adapter, "StopDiscovery") } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.Failed", "No discovery started")
            }
            try await log.wait(for: "Discovering=true") {
                $0.isPropertiesChanged("/org/bluez/hci0", Client.adapter) && $0.changed["Discovering"]?.bool == true
            }
            #expect(try await a.get("/org/bluez/hci0", Client.adapter, "Discovering")?.bool == true)
            await #expect {
                try await a.call(
                    "/org/bluez/hci0", Client.adapter, "SetDiscoveryFilter", [.variantDictionary(["RSSI": .int16(50)])])
            } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.InvalidArguments", "Invalid arguments in method call")
            }
            await #expect {
                try await a.call(
                    "/org/bluez/hci0", Client.adapter, "SetDiscoveryFilter",
                    [.variantDictionary(["Bogus": .boolean(true)])])
            } throws: {
                ($0 as? DBusError)?.name.rawValue == "org.bluez.Error.InvalidArguments"
            }
            try await a.call("/org/bluez/hci0", Client.adapter, "StopDiscovery")
            try await log.wait(for: "Discovering=false") {
                $0.isPropertiesChanged("/org/bluez/hci0", Client.adapter) && $0.changed["Discovering"]?.bool == false
            }
            _ = try await a.call(
                "/org/freedesktop/DBus".isEmpty ? "/" : "/org/bluez/hci0", "org.freedesktop.DBus.Properties", "Set",
                [
                    .string(Client.adapter), .string("Powered"), .variant(.boolean(false)),
                ])
            await #expect { try await a.call("/org/bluez/hci0", Client.adapter, "StartDiscovery") } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.NotReady", "Resource Not Ready")
            }
        }
    }

    @Test("a 180F UUID filter reports exactly the devices advertising 180F; devices appear with BlueZ's properties")
    func uuidFilter() async throws {
        try await SimulatorHarness.run(S.sensors) { harness in
            let client = try await harness.client()
            let log = try await client.signals()
            try await client.call(
                "/org/bluez/hci0", Client.adapter, "SetDiscoveryFilter",
                [
                    .variantDictionary(["UUIDs": .strings(["180f"]), "Transport": .string("le")])
                ])
            try await client.call("/org/bluez/hci0", Client.adapter, "StartDiscovery")
            let added = try await log.wait(for: "InterfacesAdded battery") { $0.isInterfacesAdded(S.battery) }
            let device = added.arguments[1].dictionary?["org.bluez.Device1"]?.dictionary ?? [:]
            #expect(device["Address"]?.string == "A4:C1:38:00:00:01")
            #expect(device["AddressType"]?.string == "public")
            #expect(device["Name"]?.string == "Battery Sensor")
            #expect(device["Alias"]?.string == "Battery Sensor")
            #expect(device["RSSI"]?.int16 == -58)
            #expect(device["Connected"]?.bool == false)
            #expect(device["ServicesResolved"]?.bool == false)
            #expect(device["UUIDs"]?.strings == ["0000180f-0000-1000-8000-00805f9b34fb"])
            #expect(device["Adapter"]?.objectPath == "/org/bluez/hci0")
            #expect(device["TxPower"] == nil)
            // a{qv} with v = ay; a{sv} with 128-bit keys
            if case .dictionary(.uint16, .variant, let entries)? = device["ManufacturerData"]?.unwrapped {
                #expect(entries.first?.key == .uint16(0xFFFF))
                #expect(entries.first?.value.bytes == [0x52, 0x42, 0x5A, 0x31])
            } else {
                Issue.record("ManufacturerData is not a{qv}: \(String(describing: device["ManufacturerData"]))")
            }
            #expect(device["ServiceData"]?.dictionary?["0000180f-0000-1000-8000-00805f9b34fb"]?.bytes == [0x64])
            // Filtered discovery: RSSI is signalled on every report, even when unchanged.
            try await log.wait(for: "RSSI update") {
                $0.isPropertiesChanged(S.battery, Client.device) && $0.changed["RSSI"] != nil
            }
            try await Task.sleep(for: .milliseconds(100))
            #expect(!log.all.contains { $0.isInterfacesAdded(S.heartRate) || $0.isInterfacesAdded(S.beacon) })
            let updates = log.all.filter { $0.isPropertiesChanged(S.battery, Client.device) }
            #expect(
                updates.allSatisfy { $0.changed.keys.sorted() == ["RSSI"] }, "unchanged MSD/ServiceData are not resent")
        }
    }

    @Test("two clients at once: an unfiltered client widens the scan; when it leaves the bus the filter applies again")
    func twoClients() async throws {
        // The HR strap must expire while the test waits; the battery sensor must not expire between
        // StopDiscovery and the RSSI check below: 3 s is both short and long enough.
        let scenario = S.sensors.replacingOccurrences(of: S.timing, with: S.timing(temporaryTimeout: "3s"))
        try await SimulatorHarness.run(scenario) { harness in
            let filtered = try await harness.client()
            let unfiltered = try await harness.client()
            let log = try await filtered.signals()
            try await filtered.call(
                "/org/bluez/hci0", Client.adapter, "SetDiscoveryFilter",
                [.variantDictionary(["UUIDs": .strings(["180F"])])])
            try await filtered.call("/org/bluez/hci0", Client.adapter, "StartDiscovery")
            try await unfiltered.call("/org/bluez/hci0", Client.adapter, "StartDiscovery")
            try await log.wait(for: "HR strap seen thanks to the unfiltered client") {
                $0.isInterfacesAdded(S.heartRate)
            }
            #expect(
                !log.all.contains { $0.isInterfacesAdded(S.beacon) },
                "no discoverable flag: an unfiltered scan ignores it")
            await unfiltered.close()
            // The HR strap is no longer reported: after the temporary timeout it is removed.
            try await log.wait(for: "HR strap removed") {
                $0.member == "InterfacesRemoved" && $0.arguments.first?.objectPath?.rawValue == S.heartRate
            }
            #expect(try await filtered.get("/org/bluez/hci0", Client.adapter, "Discovering")?.bool == true)
            try await filtered.call("/org/bluez/hci0", Client.adapter, "StopDiscovery")
            let invalidated = try await log.wait(for: "RSSI invalidated") {
                $0.isPropertiesChanged(S.battery, Client.device) && $0.invalidated.contains("RSSI")
            }
            #expect(invalidated.changed.isEmpty)
            await #expect { try await filtered.get(S.battery, Client.device, "RSSI") } throws: {
                ($0 as? DBusError) == DBusError(.invalidArgs, "No such property 'RSSI'")
            }
        }
    }

    @Test("DuplicateData=true signals manufacturer and service data on every report")
    func duplicateData() async throws {
        try await SimulatorHarness.run(S.sensors) { harness in
            let client = try await harness.client()
            let log = try await client.signals()
            try await client.call(
                "/org/bluez/hci0", Client.adapter, "SetDiscoveryFilter",
                [
                    .variantDictionary(["UUIDs": .strings(["180F"]), "DuplicateData": .boolean(true)])
                ])
            try await client.call("/org/bluez/hci0", Client.adapter, "StartDiscovery")
            try await eventually("three MSD updates") {
                log.all.filter {
                    $0.isPropertiesChanged(S.battery, Client.device) && $0.changed["ManufacturerData"] != nil
                }.count >= 3
            }
            let update = log.all.first { $0.isPropertiesChanged(S.battery, Client.device) }
            #expect(
                update?.changed.keys.sorted() == ["ManufacturerData", "RSSI", "ServiceData"],
                "one combined signal per report")
        }
    }

    /// Discovers the battery sensor and connects; returns the client's signal log.
    func connectBattery(_ client: Client) async throws -> SignalLog {
        let log = try await client.signals()
        try await client.call(
            "/org/bluez/hci0", Client.adapter, "SetDiscoveryFilter", [.variantDictionary(["UUIDs": .strings(["180F"])])]
        )
        try await client.call("/org/bluez/hci0", Client.adapter, "StartDiscovery")
        try await log.wait(for: "battery found") { $0.isInterfacesAdded(S.battery) }
        try await client.call(S.battery, Client.device, "Connect")
        try await log.wait(for: "ServicesResolved") {
            $0.isPropertiesChanged(S.battery, Client.device) && $0.changed["ServicesResolved"]?.bool == true
        }
        return log
    }

    @Test("Connect: Connected=true, reply, GATT objects with BlueZ paths, ServicesResolved=true; GAP hidden")
    func connect() async throws {
        try await SimulatorHarness.run(S.sensors) { harness in
            let client = try await harness.client()
            let log = try await connectBattery(client)
            let connected = log.all.firstIndex {
                $0.isPropertiesChanged(S.battery, Client.device) && $0.changed["Connected"]?.bool == true
            }
            let firstGATT = log.all.firstIndex {
                $0.member == "InterfacesAdded" && $0.arguments.first?.objectPath?.rawValue.contains("service") == true
            }
            let resolved = log.all.firstIndex {
                $0.isPropertiesChanged(S.battery, Client.device) && $0.changed["ServicesResolved"]?.bool == true
            }
            #expect(connected != nil && firstGATT != nil && resolved != nil)
            #expect((connected ?? 0) < (firstGATT ?? 0) && (firstGATT ?? 0) < (resolved ?? 0))
            let objects = try await client.managedObjects()
            let gatt = objects.keys.filter { $0.hasPrefix(S.battery + "/") }.sorted()
            #expect(gatt.first == S.battery + "/service0006", "GATT 0x1801 exported, GAP 0x1800 hidden")
            #expect(gatt.contains(S.battery + "/service0006/char0007/desc0009"))
            #expect(gatt.contains(level))
            #expect(gatt.contains(level + "/desc000d") && gatt.contains(level + "/desc000e"))
            let char = objects[level]?.dictionary?["org.bluez.GattCharacteristic1"]?.dictionary ?? [:]
            #expect(char["UUID"]?.string == "00002a19-0000-1000-8000-00805f9b34fb")
            #expect(char["Service"]?.objectPath?.rawValue == service)
            #expect(char["Flags"]?.strings == ["read", "notify"])
            #expect(char["MTU"]?.uint16 == 517)
            #expect(char["Notifying"]?.bool == false)
            #expect(char["NotifyAcquired"]?.bool == false)
            #expect(char["WriteAcquired"] == nil)
            let desc = objects[level + "/desc000e"]?.dictionary?["org.bluez.GattDescriptor1"]?.dictionary ?? [:]
            #expect(desc["Flags"] == nil, "remote descriptors have no Flags")
            #expect(desc["Characteristic"]?.objectPath?.rawValue == level)
            let uuids = try await client.get(S.battery, Client.device, "UUIDs")?.strings ?? []
            #expect(
                uuids.contains("00001800-0000-1000-8000-00805f9b34fb")
                    && uuids.contains("0000ff00-0000-1000-8000-00805f9b34fb"))
            // Connect on a connected LE device succeeds.
            try await client.call(S.battery, Client.device, "Connect")
        }
    }

    @Test(
        "Disconnect: ServicesResolved=false, the reply, then Connected=false (as bluetoothd 5.66); MTU gone; objects cached"
    )
    func disconnect() async throws {
        try await SimulatorHarness.run(S.sensors) { harness in
            let client = try await harness.client()
            let log = try await connectBattery(client)
            let started = Date()
            try await client.call(S.battery, Client.device, "Disconnect")
            #expect(Date().timeIntervalSince(started) >= 0.045, "BlueZ's disconnect timer (scaled to 50 ms)")
            let down = try await log.wait(for: "disconnected") {
                $0.isPropertiesChanged(S.battery, Client.device) && $0.changed["Connected"]?.bool == false
            }
            // Alone, or coalesced with an RSSI update from an advertisement in the same loop turn
            // (gdbus coalesces per object and interface too); ServicesResolved went before it.
            #expect(Set(down.changed.keys).subtracting(["RSSI"]) == ["Connected"], "\(down.changed)")
            let resolvedFalse = log.all.firstIndex {
                $0.isPropertiesChanged(S.battery, Client.device) && $0.changed["ServicesResolved"]?.bool == false
            }
            let connectedFalse = log.all.firstIndex {
                $0.isPropertiesChanged(S.battery, Client.device) && $0.changed["Connected"]?.bool == false
            }
            #expect(resolvedFalse != nil && resolvedFalse! < connectedFalse!, "ServicesResolved=false comes first")
            await #expect { try await client.get(level, Client.characteristic, "MTU") } throws: {
                ($0 as? DBusError)?.name == .invalidArgs
            }
            #expect(try await client.get(level, Client.characteristic, "UUID")?.string != nil, "objects stay exported")
            try await client.call(S.battery, Client.device, "Disconnect")  // idle: success
            await #expect {
                try await client.call(level, Client.characteristic, "ReadValue", [Client.emptyOptions])
            } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.Failed", "Not connected")
            }
        }
    }

    @Test("ReadValue: offset, PropertiesChanged(Value) before the reply, ATT errors mapped")
    func read() async throws {
        try await SimulatorHarness.run(S.sensors) { harness in
            let client = try await harness.client()
            let log = try await connectBattery(client)
            let value = try await client.call(level, Client.characteristic, "ReadValue", [Client.emptyOptions])
            #expect(value.first?.bytes == [94])
            let signal = try await log.wait(for: "Value signal") {
                $0.isPropertiesChanged(level, Client.characteristic)
            }
            #expect(signal.changed["Value"]?.bytes == [94])
            let text = S.battery + "/service000f/char0019"
            let tail = try await client.call(
                text, Client.characteristic, "ReadValue", [.variantDictionary(["offset": .uint16(6)])])
            #expect(tail.first?.bytes == Array("world".utf8))
            await #expect {
                try await client.call(
                    text, Client.characteristic, "ReadValue", [.variantDictionary(["offset": .uint16(60)])])
            } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.InvalidArguments", "Invalid offset")
            }
            await #expect {
                try await client.call(
                    text, Client.characteristic, "ReadValue", [.variantDictionary(["offset": .string("x")])])
            } throws: {
                ($0 as? DBusError)?.name.rawValue == "org.bluez.Error.InvalidArguments"
            }
            await #expect {
                try await client.call(
                    S.battery + "/service000f/char0015", Client.characteristic, "ReadValue", [Client.emptyOptions])
            } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.Failed", "Operation failed with ATT error: 0x80")
            }
            await #expect {
                try await client.call(lampWrite, Client.characteristic, "ReadValue", [Client.emptyOptions])
            } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.NotPermitted", "Read not permitted")
            }
        }
    }

    @Test("WriteValue: request and command recorded and reflected, Value not updated, flags and errors enforced")
    func write() async throws {
        try await SimulatorHarness.run(S.sensors) { harness in
            let client = try await harness.client()
            _ = try await connectBattery(client)
            try await client.call(
                lampWrite, Client.characteristic, "WriteValue",
                [.bytes([1]), .variantDictionary(["type": .string("request")])])
            #expect(
                try await client.call(lampState, Client.characteristic, "ReadValue", [Client.emptyOptions]).first?.bytes
                    == [1])
            try await client.call(
                lampWrite, Client.characteristic, "WriteValue",
                [.bytes([2]), .variantDictionary(["type": .string("command")])])
            try await eventually("command applied") {
                try await client.call(lampState, Client.characteristic, "ReadValue", [Client.emptyOptions]).first?.bytes
                    == [2]
            }
            #expect(
                try await client.get(lampWrite, Client.characteristic, "Value")?.bytes == [],
                "writes do not update Value")
            let writes = try await client.control("RecordedWrites").first?.array ?? []
            #expect(writes.map { $0["Type"]?.string } == ["request", "command"])
            #expect(writes.first?["Value"]?.bytes == [1])
            #expect(writes.first?["UUID"]?.string == "0000ff01-0000-1000-8000-00805f9b34fb")
            await #expect {
                try await client.call(
                    lampWrite, Client.characteristic, "WriteValue",
                    [.bytes([1]), .variantDictionary(["type": .string("command"), "offset": .uint16(1)])])
            } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.NotSupported", "Operation is not supported")
            }
            await #expect {
                try await client.call(
                    S.battery + "/service000f/char0017", Client.characteristic, "WriteValue",
                    [.bytes([1]), Client.emptyOptions])
            } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.InvalidArguments", "Invalid Length")
            }
            await #expect {
                try await client.call(level, Client.characteristic, "WriteValue", [.bytes([1]), Client.emptyOptions])
            } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.NotSupported", "Operation is not supported")
            }
            await #expect {
                try await client.call(
                    level + "/desc000d", Client.descriptor, "WriteValue", [.bytes([1, 0]), Client.emptyOptions])
            } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.NotPermitted", "Write not permitted")
            }
            await #expect {
                try await client.call(
                    lampWrite, Client.characteristic, "WriteValue",
                    [.bytes(Array(repeating: 0, count: 600)), .variantDictionary(["type": .string("command")])])
            } throws: {
                ($0 as? DBusError)?.name.rawValue == "org.bluez.Error.Failed"
            }
        }
    }

    @Test("notifications: per-client sessions, Notifying sticky across a reconnect and re-armed, StopNotify rules")
    func notify() async throws {
        try await SimulatorHarness.run(S.sensors) { harness in
            let client = try await harness.client()
            let other = try await harness.client()
            let log = try await connectBattery(client)
            try await client.call(level, Client.characteristic, "StartNotify")
            try await client.call(level, Client.characteristic, "StartNotify")  // idempotent
            try await log.wait(for: "Notifying=true") {
                $0.isPropertiesChanged(level, Client.characteristic) && $0.changed["Notifying"]?.bool == true
            }
            try await eventually("two notifications") {
                log.all.filter { $0.isPropertiesChanged(level, Client.characteristic) && $0.changed["Value"] != nil }
                    .count >= 2
            }
            let values = log.all.filter {
                $0.isPropertiesChanged(level, Client.characteristic) && $0.changed["Value"] != nil
            }.prefix(2).map { $0.changed["Value"]?.bytes }
            #expect(values == [[93], [92]])
            await #expect { try await other.call(level, Client.characteristic, "StopNotify") } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.Failed", "No notify session started")
            }
            await #expect {
                try await client.call(S.battery + "/service000f/char0019", Client.characteristic, "StartNotify")
            } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.NotSupported", "Operation is not supported")
            }
            try await client.call(S.battery, Client.device, "Disconnect")
            #expect(
                try await client.get(level, Client.characteristic, "Notifying")?.bool == true,
                "sticky while the client lives")
            await #expect { try await client.call(level, Client.characteristic, "StartNotify") } throws: {
                ($0 as? DBusError)?.name.rawValue == "org.bluez.Error.InProgress"
            }
            let before = log.all.count
            try await client.call(S.battery, Client.device, "Connect")
            try await eventually("notifications again after reconnect") {
                log.all.dropFirst(before).contains {
                    $0.isPropertiesChanged(level, Client.characteristic) && $0.changed["Value"] != nil
                }
            }
            await client.close()
            try await eventually("Notifying=false when the subscriber left the bus") {
                try await other.get(level, Client.characteristic, "Notifying")?.bool == false
            }
        }
    }
}
