import BlueZ
import Bluetooth
import DBus
import Foundation
import TestSupport
import Testing

@Suite("CentralManager scanning")
struct ScanningTests {
    @Test(
        "a 180F scan reports the battery sensor with its advertisement data and never the heart-rate strap",
        arguments: [
            "180F", "0000180F", "0000180f-0000-1000-8000-00805f9b34fb",
        ])
    func serviceFilter(uuid: String) async throws {
        try await CentralHarness.run(Scenarios.sensors()) { harness in
            let central = try await harness.central()
            let results = try await central.scan(
                ScanOptions(services: [try #require(BluetoothUUID(uuid))], allowDuplicates: true))
            let seen = try await collect(results, count: 10, "10 discoveries")
            #expect(seen.allSatisfy { $0.peripheral.address == Scenarios.battery })
            #expect(seen.last?.advertisementData == Scenarios.batteryAdvertisement)
            #expect(await central.isScanning)
            await central.close()
        }
    }

    @Test("without allowDuplicates a device is reported once while its advertisement content stays the same")
    func noDuplicates() async throws {
        try await CentralHarness.run(Scenarios.sensors()) { harness in
            let central = try await harness.central()
            let quiet = try await central.scan(ScanOptions(services: [BluetoothUUID(0x180F)]))
            let noisy = try await central.scan(ScanOptions(services: [BluetoothUUID(0x180F)], allowDuplicates: true))
            _ = try await collect(noisy, count: 20, "20 reports with duplicates")
            let counter = ResultCounter()
            let task = Task { for await _ in quiet { await counter.add() } }
            try await eventually("first report") { await counter.count >= 1 }
            _ = try await collect(noisy, count: 10, "10 more reports")
            #expect(await counter.count == 1)
            task.cancel()
            await central.close()
        }
    }

    @Test("an RSSI threshold drops weaker devices")
    func rssiThreshold() async throws {
        try await CentralHarness.run(Scenarios.sensors()) { harness in
            let central = try await harness.central()
            let results = try await central.scan(ScanOptions(allowDuplicates: true, rssiThreshold: -60))
            let seen = try await collect(results, count: 15, "15 reports")
            #expect(seen.allSatisfy { ($0.rssi ?? 0) >= -60 })
            #expect(seen.contains { $0.peripheral.address == Scenarios.battery })
            #expect(!seen.contains { $0.peripheral.address == Scenarios.heartRate })
            await central.close()
        }
    }

    @Test("two clients scanning at once with different filters each see only their devices")
    func twoClients() async throws {
        try await CentralHarness.run(Scenarios.sensors()) { harness in
            let one = try await harness.central()
            let two = try await harness.central()
            let battery = try await one.scan(ScanOptions(services: [BluetoothUUID(0x180F)], allowDuplicates: true))
            let heart = try await two.scan(ScanOptions(services: [BluetoothUUID(0x180D)], allowDuplicates: true))
            let a = try await collect(battery, count: 8, "battery reports")
            let b = try await collect(heart, count: 8, "heart-rate reports")
            #expect(a.allSatisfy { $0.peripheral.address == Scenarios.battery })
            #expect(b.allSatisfy { $0.peripheral.address == Scenarios.heartRate })
            await one.close()
            // The other client's scan goes on after the first one left.
            _ = try await collect(heart, count: 3, "heart-rate reports after the other client left")
            await two.close()
        }
    }

    @Test(
        "a scan started after another client's unfiltered discovery created the devices still reports them (BlueZ signals nothing more for a known device then)",
        arguments: [false, true])
    func devicesKnownBeforeTheScan(centralStartsFirst: Bool) async throws {
        try await CentralHarness.run(Scenarios.sensors()) { harness in
            // With centralStartsFirst the devices reach the central as InterfacesAdded while it
            // has no scan; otherwise they are in its first GetManagedObjects.
            let early = centralStartsFirst ? try await harness.central() : nil
            let other = try await harness.client()
            _ = try await other.call(
                destination: "org.bluez", path: "/org/bluez/hci0", interface: "org.bluez.Adapter1",
                method: "StartDiscovery",
                timeout: .seconds(30))
            try await eventually("the other client's discovery exported both devices") {
                let paths = try await managedDevicePaths(other)
                return paths.contains("/org/bluez/hci0/dev_A4_C1_38_00_00_01")
                    && paths.contains("/org/bluez/hci0/dev_A4_C1_38_00_00_06")
            }
            let central: CentralManager
            if let early { central = early } else { central = try await harness.central() }
            // The battery sensor's RSSI, data and name never change: in the merged (unfiltered)
            // scan BlueZ sends no further signal for it.
            let results = try await central.scan(ScanOptions(services: [BluetoothUUID(0x180F)]))
            let found = try await first(results, "the battery sensor reported")
            #expect(found.peripheral.address == Scenarios.battery)
            #expect(found.advertisementData.localName == "Battery Sensor")
            #expect(found.advertisementData.rssi == -58)
            #expect(found.advertisementData.manufacturerData == [0xFFFF: [0x52, 0x42, 0x5A, 0x31]])
            // An unfiltered scan of the same manager reports the heart-rate strap as well.
            let all = try await central.scan()
            let everyone = try await collect(all, count: 2, "both discoverable devices")
            #expect(Set(everyone.map(\.peripheral.address)) == [Scenarios.battery, Scenarios.heartRate])
            await central.close()
            await other.close()
        }
    }

    @Test("a 181A scan still reports a device connected before whose GATT services lack 181A, by its 181A service data")
    func serviceDataAfterResolution() async throws {
        let scenario = """
            {
              \(Scenarios.timing),
              "adapters": [{"name": "hci0", "address": "00:AA:01:00:00:00"}],
              "devices": [
                {"address": "A4:C1:38:00:00:0A", "name": "Env", "rssi": -50, "interval": "20ms", "service_uuids": ["181A"],
                 "service_data": {"181A": {"hex": "2a"}},
                 "gatt": [{"uuid": "180F", "characteristics": [{"uuid": "2A19", "flags": ["read"], "value": {"hex": "5e"}}]}]}
              ]
            }
            """
        try await CentralHarness.run(scenario) { harness in
            let central = try await harness.central()
            let filter = ScanOptions(services: [BluetoothUUID(0x181A)])
            let found = try await first(try await central.scan(filter), "found by its advertised 181A").peripheral
            try await central.connect(found, timeout: .seconds(30), autoReconnect: false)
            _ = try await central.discoverServices(for: found)
            try await central.disconnect(found)
            // BlueZ's UUIDs are now the resolved services: 181A is only in the service data.
            let remembered = await central.rememberedAdvertisementData(found.address)
            #expect(!remembered.serviceUUIDs.contains(BluetoothUUID(0x181A)))
            let again = try await first(try await central.scan(filter), "found again after the connection")
            #expect(again.peripheral.address == found.address)
            #expect(again.advertisementData.serviceData[BluetoothUUID(0x181A)] == [0x2A])
            await central.close()
        }
    }

    @Test(
        "scan results, the remembered advertisement and the peripheral snapshot keep name, UUIDs, manufacturer and service data, RSSI, tx power and the link state while BlueZ changes properties the central does not keep"
    )
    func keptProperties() async throws {
        try await CentralHarness.run(Scenarios.sensors()) { harness in
            let central = try await harness.central()
            let results = try await central.scan(ScanOptions(services: [BluetoothUUID(0x180F)], allowDuplicates: true))
            _ = try await first(results, "the battery sensor reported") { $0.peripheral.address == Scenarios.battery }
            // Alias and Trusted are writable Device1 properties the central does not keep: their
            // PropertiesChanged must change nothing it reports.
            let client = try await harness.client()
            let path = try #require(DBusObjectPath(rawValue: "/org/bluez/hci0/dev_A4_C1_38_00_00_01"))
            for (name, value) in [("Alias", DBusValue.string("Kitchen")), ("Trusted", .boolean(true))] {
                _ = try await client.call(
                    destination: "org.bluez", path: path, interface: "org.freedesktop.DBus.Properties", method: "Set",
                    arguments: [.string("org.bluez.Device1"), .string(name), .variant(value)], timeout: .seconds(10))
            }
            _ = try await central.ping()  // bluetoothd's reply comes after its signals
            let fresh = try await central.scan(ScanOptions(services: [BluetoothUUID(0x180F)]))
            let found = try await first(fresh, "the battery sensor reported to a new scan")
            #expect(found.peripheral.name == "Battery Sensor")
            #expect(found.peripheral.addressType == .public)
            #expect(found.advertisementData == Scenarios.batteryAdvertisement)

            try await central.connect(found.peripheral, timeout: .seconds(30), autoReconnect: false)
            _ = try await central.discoverServices(for: found.peripheral)
            let snapshot = await central.peripheral(Scenarios.battery)
            #expect(snapshot.isConnected && snapshot.servicesResolved)
            #expect(snapshot.name == "Battery Sensor")
            // Once resolved, BlueZ's UUIDs are the GATT services.
            #expect(
                await central.connectedPeripherals(withServices: [BluetoothUUID(0xFF00)]).map(\.address) == [
                    Scenarios.battery
                ])
            let remembered = await central.rememberedAdvertisementData(Scenarios.battery)
            #expect(remembered.localName == "Battery Sensor")
            #expect(remembered.serviceUUIDs.contains(BluetoothUUID(0xFF00)))
            #expect(remembered.manufacturerData == [0xFFFF: [0x52, 0x42, 0x5A, 0x31]])
            #expect(remembered.serviceData == [BluetoothUUID(0x180F): [0x64]])
            #expect(remembered.txPower == 4)
            try await central.disconnect(found.peripheral)
            #expect(await !central.peripheral(Scenarios.battery).isConnected)
            await client.close()
            await central.close()
        }
    }

    @Test("StartDiscovery refused with InProgress is retried with a growing delay, never in a tight loop")
    func discoveryBackoff() async throws {
        try await CentralHarness.run(Scenarios.sensors(startDiscoveryFailures: 3)) { harness in
            let central = try await harness.central { $0.discoveryRetryDelay = 0.05 }
            let results = try await central.scan(ScanOptions(services: [BluetoothUUID(0x180F)], allowDuplicates: true))
            _ = try await collect(results, count: 3, "reports once discovery finally started")
            let counters = try await harness.sim.currentCounters
            // Three refusals, then the call that worked: four calls in all, spaced 50, 100, 200 ms.
            #expect(counters.startDiscoveryCalls == 4)
            #expect(await central.discoveryRetryDelay == 0, "the backoff resets once discovery runs")
            await central.close()
        }
    }

    @Test("an adapter that keeps refusing discovery gets calls spaced ever further apart")
    func discoveryBackoffGrows() async throws {
        try await CentralHarness.run(Scenarios.sensors(startDiscoveryFailures: 1_000_000)) { harness in
            let central = try await harness.central { $0.discoveryRetryDelay = 0.02 }
            let started = ContinuousClock.now
            let results = try await central.scan(ScanOptions(services: [BluetoothUUID(0x180F)]))
            // The fifth call comes after four refusals waited out 20 + 40 + 80 + 160 ms. (Counting
            // the calls made by the time the delay reached 160 ms depended on how soon this task
            // looked: on a loaded machine it looked late and counted 7.)
            try await eventually("a fifth StartDiscovery call") {
                try await harness.sim.currentCounters.startDiscoveryCalls >= 5
            }
            let elapsed = ContinuousClock.now - started
            #expect(
                elapsed >= .milliseconds(300),
                "five calls after \(elapsed): a tight retry loop, or a delay that does not grow")
            #expect(await central.discoveryRetryDelay >= 0.16, "the delay doubled on every refusal")
            _ = results
            await central.close()
        }
    }

    @Test("ending the last scan stops discovery in BlueZ")
    func stopsDiscovery() async throws {
        try await CentralHarness.run(Scenarios.sensors()) { harness in
            let central = try await harness.central()
            let client = try await harness.client()
            var results: AsyncStream<ScanResult>? = try await central.scan()
            _ = try await first(results!, "any report")
            #expect(try await discovering(client))
            results = nil
            try await eventually("Discovering=false") { try await !discovering(client) }
            #expect(await !central.isScanning)
            await central.close()
            await client.close()
        }
    }
}

func discovering(_ client: DBusConnection) async throws -> Bool {
    try await client.call(
        destination: "org.bluez", path: "/org/bluez/hci0", interface: "org.freedesktop.DBus.Properties", method: "Get",
        arguments: [.string("org.bluez.Adapter1"), .string("Discovering")]
    ).first?.bool == true
}

/// The device object paths BlueZ exports now (GetManagedObjects).
func managedDevicePaths(_ client: DBusConnection) async throws -> [String] {
    let reply = try await client.call(
        destination: "org.bluez", path: .root, interface: "org.freedesktop.DBus.ObjectManager",
        method: "GetManagedObjects",
        timeout: .seconds(30))
    return (reply.first?.entries ?? []).compactMap { entry in
        guard let path = entry.key.objectPath,
            entry.value.entries?.contains(where: { $0.key.string == "org.bluez.Device1" }) == true
        else { return nil }
        return path.rawValue
    }
}

actor ResultCounter {
    private(set) var count = 0
    func add() { count += 1 }
}
