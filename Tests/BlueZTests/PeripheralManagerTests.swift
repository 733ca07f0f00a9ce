import BlueZ
import BlueZSimulator
import Bluetooth
import DBus
import Foundation
import TestSupport
import Testing

/// gattway's PeripheralManager on hci1 against gattway's CentralManager on hci0, through the
/// simulator's linked adapters (what hci1 advertises hci0 discovers; connecting proxies GATT
/// into the registered application).
@Suite("PeripheralManager against the simulator")
struct PeripheralManagerTests {
    static let centralAddress = BluetoothAddress("00:AA:01:00:00:00")!
    static let peripheralAddress = BluetoothAddress("00:AA:02:00:00:00")!

    static let scenario = """
        {
          "timing": {"disconnect_delay": "50ms", "temporary_timeout": "5s", "resolve_delay": "10ms", "gatt_latency": 0},
          "adapters": [{"name": "hci0", "address": "00:AA:01:00:00:00"}, {"name": "hci1", "address": "00:AA:02:00:00:00"}],
          "links": [{"adapters": ["hci0", "hci1"], "interval": "20ms"}],
          "devices": []
        }
        """

    static let service = MutableService(
        uuid: BluetoothUUID(0x180F),
        characteristics: [
            MutableCharacteristic(
                uuid: BluetoothUUID(0x2A19), properties: [.read, .notify], value: [94],
                descriptors: [.userDescription("Level")]),
            MutableCharacteristic(uuid: BluetoothUUID(0xFF01), properties: [.writeWithoutResponse]),
            MutableCharacteristic(uuid: BluetoothUUID(0xFF02), properties: [.write]),
            MutableCharacteristic(uuid: BluetoothUUID(0xFF03), properties: [.read]),
        ])

    static let advertisement = Advertisement(
        localName: "gw-periph", serviceUUIDs: [BluetoothUUID(0x180F)], manufacturerData: [0xFFFF: [1, 2]],
        serviceData: [BluetoothUUID(0x180F): [0x5E]])

    /// A peripheral manager on hci1 of the harness bus, powered on.
    static func peripheral(_ harness: CentralHarness) async throws -> PeripheralManager {
        let manager = try await PeripheralManager.start(
            options: PeripheralOptions(adapter: .name("hci1")), bus: harness.bus, on: harness.loop)
        try await manager.waitUntilPoweredOn(timeout: .seconds(5))
        return manager
    }

    /// Scans from hci0 until the peripheral's advertisement shows `predicate`.
    static func discover(
        _ central: CentralManager, _ what: String,
        where predicate: @escaping @Sendable (AdvertisementData) -> Bool = { _ in true }
    ) async throws -> ScanResult {
        let results = try await central.scan(ScanOptions(services: [BluetoothUUID(0x180F)]))
        return try await first(results, within: 10, what) {
            $0.peripheral.address == peripheralAddress && predicate($0.advertisementData)
        }
    }

    /// Finds the peripheral and connects while still scanning (BlueZ drops a temporary device
    /// that is not seen any more; docs/bluez.md §3.3).
    static func connect(_ central: CentralManager, _ what: String) async throws -> ScanResult {
        let results = try await central.scan(ScanOptions(services: [BluetoothUUID(0x180F)]))
        let found = try await first(results, within: 10, what) { $0.peripheral.address == peripheralAddress }
        try await central.connect(found.peripheral, timeout: .seconds(5), autoReconnect: false)
        withExtendedLifetime(results) {}
        return found
    }

    @Test(
        "an advertisement over 31 bytes goes out as extended advertising when the adapter supports it, and is refused saying why when not"
    )
    func extendedAdvertising() async throws {
        let custom = try #require(BluetoothUUID("6e400001-b5a3-f393-e0a9-e50e24dcca9e"))
        let large = Advertisement(
            localName: "gattway-extended", serviceUUIDs: [custom], manufacturerData: [0xFFFF: Array(0..<20)])
        #expect(large.legacyPayloadLength > Advertisement.legacyLimit)
        // Legacy only (no SupportedSecondaryChannels): refused before BlueZ sees it, saying why.
        try await CentralHarness.run(Self.scenario) { harness in
            let manager = try await Self.peripheral(harness)
            #expect(await manager.supportedSecondaryChannels().isEmpty)
            await #expect { try await manager.startAdvertising(large) } throws: { error in
                let error = error as? PeripheralError
                return error?.code == .advertisementTooLarge && error?.message.contains("legacy limit is 31") == true
                    && error?.message.contains("no extended advertising") == true
            }
            #expect(try await harness.sim.registeredAdvertisements(on: "hci1").isEmpty)
        }
        // A controller with extended advertising: registered on the 1M secondary channel and seen
        // whole by a scanning central.
        let extended = Self.scenario.replacingOccurrences(
            of: #"{"name": "hci1", "address": "00:AA:02:00:00:00"}"#,
            with: #"{"name": "hci1", "address": "00:AA:02:00:00:00", "secondary_channels": ["1M", "2M"]}"#)
        try await CentralHarness.run(extended) { harness in
            let manager = try await Self.peripheral(harness)
            #expect(await manager.supportedSecondaryChannels() == ["1M", "2M"])
            try await manager.startAdvertising(large)
            let registered = try await harness.sim.registeredAdvertisements(on: "hci1")
            #expect(registered.map(\.secondaryChannel) == ["1M"])
            #expect(await manager.advertisement?.secondaryChannel == "1M")
            let central = try await harness.central { $0.adapter = .name("hci0") }
            let results = try await central.scan(ScanOptions(services: [custom]))
            let found = try await first(results, within: 10, "the extended advertisement") {
                $0.peripheral.address == Self.peripheralAddress
            }
            #expect(found.advertisementData.localName == "gattway-extended")
            #expect(found.advertisementData.manufacturerData[0xFFFF] == Array(0..<20))
            // Over 251 bytes even extended advertising cannot carry it.
            let huge = Advertisement(localName: "x", manufacturerData: [0xFFFF: Array(repeating: 1, count: 250)])
            await #expect { try await manager.updateAdvertisement(huge) } throws: { error in
                (error as? PeripheralError)?.message.contains("extended limit is 251") == true
            }
        }
    }

    @Test("solicited service UUIDs reach bluetoothd as SolicitUUIDs and are refused when they do not fit")
    func solicitedUUIDs() async throws {
        try await CentralHarness.run(Self.scenario) { harness in
            let manager = try await Self.peripheral(harness)
            let custom = try #require(BluetoothUUID("6e400001-b5a3-f393-e0a9-e50e24dcca9e"))
            try await manager.startAdvertising(
                Advertisement(localName: "gw", solicitUUIDs: [BluetoothUUID(0x1805), custom]))
            // What bluetoothd read (a scanning adapter does not show solicited UUIDs in Device1).
            let simulator = try harness.sim
            #expect(
                await simulator.registeredAdvertisements(on: "hci1").map(\.solicitUUIDs) == [
                    [BluetoothUUID(0x1805), custom]
                ])
            await #expect {
                try await manager.updateAdvertisement(
                    Advertisement(
                        localName: "gw", txPower: 0,
                        solicitUUIDs: [custom, BluetoothUUID(0x1805), BluetoothUUID(0x180A)]))
            } throws: {
                ($0 as? PeripheralError)?.code == .advertisementTooLarge
            }
        }
    }

    @Test(
        "scan finds the advertisement; connect, discover, read, write, app errors, notifications, unsubscribe on disconnect"
    )
    func endToEnd() async throws {
        try await CentralHarness.run(Self.scenario) { harness in
            let manager = try await Self.peripheral(harness)
            let events = await manager.events()
            let local = try await manager.add(Self.service)
            #expect(await manager.services == [local])
            try await manager.startAdvertising(Self.advertisement)
            #expect(await manager.isAdvertising)

            let central = try await harness.central { $0.adapter = .name("hci0") }
            let found = try await Self.connect(central, "the advertisement")
            #expect(found.advertisementData.localName == "gw-periph")
            #expect(found.advertisementData.serviceUUIDs.contains(BluetoothUUID(0x180F)))
            #expect(found.advertisementData.serviceData[BluetoothUUID(0x180F)] == [0x5E])
            #expect(found.advertisementData.manufacturerData[0xFFFF] == [1, 2])

            var characteristics: [BluetoothUUID: Characteristic] = [:]
            for service in try await central.discoverServices([BluetoothUUID(0x180F)], for: found.peripheral) {
                for characteristic in try await central.discoverCharacteristics(for: service) {
                    characteristics[characteristic.uuid] = characteristic
                }
            }
            #expect(
                Set(characteristics.keys) == [
                    BluetoothUUID(0x2A19), BluetoothUUID(0xFF01), BluetoothUUID(0xFF02), BluetoothUUID(0xFF03),
                ])
            let level = try #require(characteristics[BluetoothUUID(0x2A19)])
            #expect(level.properties.isSuperset(of: [.read, .notify]))

            // A cached value is answered by the manager.
            #expect(try await central.readValue(for: level) == [94])
            let description = try #require(
                try await central.discoverDescriptors(for: level).first { $0.uuid == BluetoothUUID(0x2901) })
            #expect(try await central.readValue(for: description) == Array("Level".utf8))

            // A read the app answers: the request names the central, the offset and the MTU.
            let dynamic = try #require(characteristics[BluetoothUUID(0xFF03)])
            let read = Task { try await central.readValue(for: dynamic) }
            let request = try await Self.nextRead(events)
            #expect(
                request.attribute == .characteristic(try #require(await manager.characteristic(BluetoothUUID(0xFF03)))))
            #expect(request.central?.address == Self.centralAddress)
            #expect(request.offset == 0)
            #expect(request.context.mtu == 517)
            #expect(request.context.link == .le)
            request.respond(with: [7, 8])
            #expect(try await read.value == [7, 8])

            // An app error reaches the central as the ATT code it chose.
            let refused = Task { try await central.readValue(for: dynamic) }
            try await Self.nextRead(events).fail(.application(0x80))
            let error = await #expect(throws: CentralError.self) { try await refused.value }
            #expect(error?.code == .failed)
            #expect(error?.message.contains("0x80") == true, "\(String(describing: error))")

            // Write with response: answered by the app.
            let request2 = try #require(characteristics[BluetoothUUID(0xFF02)])
            let written = Task { try await central.writeValue([1, 2], for: request2, type: .withResponse) }
            let write = try await Self.nextWrite(events)
            #expect(write.value == [1, 2])
            #expect(write.expectsResponse)
            #expect(write.central?.address == Self.centralAddress)
            write.respond()
            try await written.value
            // …and refused.
            let refusedWrite = Task { try await central.writeValue([9], for: request2, type: .withResponse) }
            try await Self.nextWrite(events).fail(.invalidAttributeValueLength)
            let writeError = await #expect(throws: CentralError.self) { try await refusedWrite.value }
            #expect(writeError?.code == .invalidValueLength)

            // Write without response: delivered, nothing to answer.
            try await central.writeValue(
                [3], for: try #require(characteristics[BluetoothUUID(0xFF01)]), type: .withoutResponse)
            let command = try await Self.nextWrite(events)
            #expect(command.value == [3])
            #expect(!command.expectsResponse)

            // Nobody subscribed: nothing is sent, the cached value changes.
            let localLevel = try #require(await manager.characteristic(BluetoothUUID(0x2A19)))
            #expect(try await manager.updateValue([95], for: localLevel) == false)
            #expect(await manager.value(of: localLevel) == [95])

            // Subscribe: StartNotify reaches the app; updateValue notifies.
            let values = try await central.notifications(for: level)
            let subscribed = try await first(events, "subscribed") {
                if case .subscribed = $0 { return true } else { return false }
            }
            guard case .subscribed(let which) = subscribed else { return }
            #expect(which == localLevel)
            #expect(await manager.isSubscribed(localLevel))
            #expect(try await manager.updateValue([93], for: localLevel))
            #expect(try await first(values, "notification") { $0 == [93] } == [93])

            // Disconnect: the last subscriber is gone.
            try await central.disconnect(found.peripheral)
            _ = try await first(events, "unsubscribed") {
                if case .unsubscribed(localLevel) = $0 { return true } else { return false }
            }
            #expect(try await manager.updateValue([92], for: localLevel) == false)
            await central.close()
            await manager.close()
        }
    }

    @Test(
        "events(handler:): a central's read and write reach the handler on the loop thread inside bluetoothd's call and are answered from it; after stopEvents a read is refused"
    )
    func eventHandler() async throws {
        try await CentralHarness.run(Self.scenario) { harness in
            let manager = try await Self.peripheral(harness)
            let loop = manager.loop
            let handled = SeenOnLoop<String>()
            let token = await manager.events { event in
                switch event {
                case .read(let request):
                    handled.append("read", onLoop: loop.inLoop)
                    request.respond(with: [7, 8])
                case .write(let request):
                    handled.append("write \(request.value)", onLoop: loop.inLoop)
                    if request.value == [9] { request.fail(.invalidAttributeValueLength) } else { request.respond() }
                default:
                    break
                }
            }
            _ = try await manager.add(Self.service)
            try await manager.startAdvertising(Self.advertisement)
            let central = try await harness.central { $0.adapter = .name("hci0") }
            let found = try await Self.connect(central, "the advertisement")
            var characteristics: [BluetoothUUID: Characteristic] = [:]
            for service in try await central.discoverServices([BluetoothUUID(0x180F)], for: found.peripheral) {
                for characteristic in try await central.discoverCharacteristics(for: service) {
                    characteristics[characteristic.uuid] = characteristic
                }
            }
            let dynamic = try #require(characteristics[BluetoothUUID(0xFF03)])
            let writable = try #require(characteristics[BluetoothUUID(0xFF02)])
            #expect(try await central.readValue(for: dynamic) == [7, 8])
            try await central.writeValue([1, 2], for: writable, type: .withResponse)
            let refused = await #expect(throws: CentralError.self) {
                try await central.writeValue([9], for: writable, type: .withResponse)
            }
            #expect(refused?.code == .invalidValueLength)
            #expect(handled.items == ["read", "write [1, 2]", "write [9]"])
            #expect(handled.allOnLoop)

            // No consumer left: the manager refuses what only the app could answer.
            await manager.stopEvents(token)
            await #expect(throws: CentralError.self) { try await central.readValue(for: dynamic) }
            #expect(handled.items.count == 3)
            try await central.disconnect(found.peripheral)
            await central.close()
            await manager.close()
        }
    }

    @Test(
        "indications reach the central and come back as indicationConfirmed; a descriptor without value is read by the app"
    )
    func indications() async throws {
        try await CentralHarness.run(Self.scenario) { harness in
            let manager = try await Self.peripheral(harness)
            let events = await manager.events()
            let local = try await manager.add(
                MutableService(
                    uuid: BluetoothUUID(0x180F),
                    characteristics: [
                        MutableCharacteristic(
                            uuid: BluetoothUUID(0x2A37), properties: [.indicate],
                            descriptors: [MutableDescriptor(uuid: BluetoothUUID(0x2901), value: nil)])
                    ]))
            try await manager.startAdvertising(Advertisement(serviceUUIDs: [BluetoothUUID(0x180F)]))
            let central = try await harness.central { $0.adapter = .name("hci0") }
            let found = try await Self.connect(central, "the advertisement")
            let service = try #require(
                try await central.discoverServices([BluetoothUUID(0x180F)], for: found.peripheral).first)
            let measurement = try #require(try await central.discoverCharacteristics(for: service).first)
            #expect(measurement.properties.contains(.indicate))

            let descriptor = try #require(
                try await central.discoverDescriptors(for: measurement).first { $0.uuid == BluetoothUUID(0x2901) })
            let read = Task { try await central.readValue(for: descriptor) }
            let request = try await Self.nextRead(events)
            #expect(request.attribute == .descriptor(local.characteristics[0].descriptors[0]))
            request.respond(withWholeValue: Array("Heart rate".utf8))
            #expect(try await read.value == Array("Heart rate".utf8))

            let values = try await central.notifications(for: measurement)
            _ = try await first(events, "subscribed") { if case .subscribed = $0 { return true } else { return false } }
            #expect(try await manager.updateValue([0x06, 0x48], for: local.characteristics[0]))
            #expect(try await first(values, "indication") { _ in true } == [0x06, 0x48])
            _ = try await first(events, "confirmed") {
                if case .indicationConfirmed(local.characteristics[0]) = $0 { return true } else { return false }
            }
            try await central.disconnect(found.peripheral)
            await central.close()
            await manager.close()
        }
    }

    @Test(
        "long reads: the offset reaches the app and cached values are sliced; past the end is ATT 0x07 Invalid offset")
    func offsets() async throws {
        try await CentralHarness.run(Self.scenario) { harness in
            let manager = try await Self.peripheral(harness)
            let events = await manager.events()
            _ = try await manager.add(Self.service)
            try await manager.startAdvertising(Self.advertisement)
            let central = try await harness.central { $0.adapter = .name("hci0") }
            let found = try await Self.connect(central, "the advertisement")
            _ = try await central.discoverServices(for: found.peripheral)
            // ReadValue with an offset, as BlueZ's long read (Read Blob) does, on hci0's view of the peripheral.
            let client = try await harness.client()
            let objects = try await client.call(
                destination: "org.bluez", path: "/", interface: "org.freedesktop.DBus.ObjectManager",
                method: "GetManagedObjects")
            func path(_ uuid: UInt16) throws -> DBusObjectPath {
                let entry = (objects.first?.entries ?? []).first { entry in
                    guard let path = entry.key.objectPath,
                        path.rawValue.hasPrefix("/org/bluez/hci0/dev_00_AA_02_00_00_00/")
                    else { return false }
                    return entry.value["org.bluez.GattCharacteristic1"]?["UUID"]?.string
                        == BluetoothUUID(uuid).description
                }
                return try #require(entry?.key.objectPath)
            }
            func read(_ uuid: UInt16, offset: UInt16) async throws -> [UInt8] {
                try await client.call(
                    destination: "org.bluez", path: try path(uuid), interface: "org.bluez.GattCharacteristic1",
                    method: "ReadValue",
                    arguments: [.variantDictionary(["offset": .uint16(offset)])]
                ).first?.bytes ?? []
            }
            let dynamic = Task { try await read(0xFF03, offset: 2) }
            let request = try await Self.nextRead(events)
            #expect(request.offset == 2)
            request.respond(withWholeValue: [1, 2, 3, 4])
            #expect(try await dynamic.value == [3, 4])

            #expect(try await read(0x2A19, offset: 1) == [])
            let past = await #expect(throws: DBusError.self) { _ = try await read(0x2A19, offset: 2) }
            #expect(past?.name.rawValue == "org.bluez.Error.InvalidArguments")
            #expect(past?.message == "Invalid offset")
            await client.close()
            try await central.disconnect(found.peripheral)
            await central.close()
            await manager.close()
        }
    }

    @Test("two centrals: StartNotify again for the second, StopNotify only when the last one leaves")
    func twoCentrals() async throws {
        let scenario = """
            {
              "timing": {"disconnect_delay": "50ms", "temporary_timeout": "5s", "resolve_delay": "10ms", "gatt_latency": 0},
              "adapters": [{"name": "hci0", "address": "00:AA:01:00:00:00"}, {"name": "hci1", "address": "00:AA:02:00:00:00"},
                           {"name": "hci2", "address": "00:AA:03:00:00:00"}],
              "links": [{"adapters": ["hci0", "hci1"], "interval": "20ms"}, {"adapters": ["hci2", "hci1"], "interval": "20ms"}],
              "devices": []
            }
            """
        try await CentralHarness.run(scenario) { harness in
            let manager = try await Self.peripheral(harness)
            let events = await manager.events()
            let local = try await manager.add(Self.service)
            let level = local.characteristics[0]
            try await manager.startAdvertising(Self.advertisement)
            var centrals: [(CentralManager, Peripheral, AsyncThrowingStream<[UInt8], any Error>)] = []
            for adapter in ["hci0", "hci2"] {
                let central = try await harness.central { $0.adapter = .name(adapter) }
                let found = try await Self.connect(central, "the advertisement from \(adapter)")
                let service = try #require(
                    try await central.discoverServices([BluetoothUUID(0x180F)], for: found.peripheral).first)
                let characteristic = try #require(
                    try await central.discoverCharacteristics([BluetoothUUID(0x2A19)], for: service).first)
                centrals.append((central, found.peripheral, try await central.notifications(for: characteristic)))
                _ = try await first(events, "subscribed from \(adapter)") {
                    if case .subscribed(level) = $0 { return true } else { return false }
                }
            }
            #expect(try await manager.updateValue([50], for: level))
            for (_, _, values) in centrals { #expect(try await first(values, "both notified") { _ in true } == [50]) }

            // The first central leaves: the other is still subscribed.
            try await centrals[0].0.disconnect(centrals[0].1)
            try await Task.sleep(for: .milliseconds(200))
            #expect(await manager.isSubscribed(level))
            #expect(try await manager.updateValue([51], for: level))
            #expect(try await first(centrals[1].2, "the remaining central notified") { _ in true } == [51])

            // The last one leaves: StopNotify.
            try await centrals[1].0.disconnect(centrals[1].1)
            _ = try await first(events, "unsubscribed") {
                if case .unsubscribed(level) = $0 { return true } else { return false }
            }
            #expect(await manager.isSubscribed(level) == false)
            for (central, _, _) in centrals { await central.close() }
            await manager.close()
        }
    }

    @Test("bluetoothd restart and adapter power cycle: application and advertisement are registered again")
    func recovery() async throws {
        try await CentralHarness.run(Self.scenario) { harness in
            let manager = try await Self.peripheral(harness)
            let events = await manager.events()
            _ = try await manager.add(Self.service)
            try await manager.startAdvertising(Self.advertisement)
            let states = await manager.stateUpdates()

            try await harness.sim.crash(restartAfter: 0.2)
            _ = try await first(states, "resetting") { $0 == .resetting }
            _ = try await first(events, "stopped with bluetoothd") {
                if case .advertisingStopped = $0 { return true } else { return false }
            }
            _ = try await first(states, within: 10, "powered on again") { $0 == .poweredOn }
            _ = try await first(events, within: 10, "services registered again") {
                if case .servicesRegistered(let services) = $0 { return services.count == 1 } else { return false }
            }
            _ = try await first(events, within: 10, "advertising again") {
                if case .advertisingStarted = $0 { return true } else { return false }
            }
            #expect(await manager.isAdvertising)
            // A central finds and reads it from the new daemon.
            let central = try await harness.central { $0.adapter = .name("hci0") }
            let found = try await Self.connect(central, "the advertisement after the restart")
            #expect(try await Self.readLevel(central, found.peripheral) == [94])
            try await central.disconnect(found.peripheral)
            await central.close()

            // Power cycle of hci1.
            try await harness.sim.setPowered(adapter: "hci1", false)
            _ = try await first(states, "powered off") { $0 == .poweredOff }
            #expect(await manager.isAdvertising == false)
            try await harness.sim.setPowered(adapter: "hci1", true)
            _ = try await first(events, within: 10, "advertising after power-on") {
                if case .advertisingStarted = $0 { return true } else { return false }
            }
            #expect(await manager.isAdvertising)
            await manager.close()
        }
    }

    /// Discovers 180F/2A19 on a connected peripheral and reads it.
    static func readLevel(_ central: CentralManager, _ peripheral: Peripheral) async throws -> [UInt8] {
        let service = try #require(try await central.discoverServices([BluetoothUUID(0x180F)], for: peripheral).first)
        let level = try #require(try await central.discoverCharacteristics([BluetoothUUID(0x2A19)], for: service).first)
        return try await central.readValue(for: level)
    }

    @Test(
        "after a central disconnects the advertisement is registered anew: connectable again where the controller stopped it for good"
    )
    func advertisingAfterDisconnection() async throws {
        // resume_advertising false: a connection stops hci1's advertisement until it is registered
        // again (as the kernel sometimes leaves it; PeripheralManager+Advertising.swift).
        let scenario = Self.scenario.replacing(
            #"{"adapters": ["hci0", "hci1"], "interval": "20ms"}"#,
            with: #"{"adapters": ["hci0", "hci1"], "interval": "20ms", "resume_advertising": false}"#)
        #expect(scenario != Self.scenario)
        try await CentralHarness.run(scenario) { harness in
            let manager = try await Self.peripheral(harness)
            let events = await manager.events()
            _ = try await manager.add(Self.service)
            try await manager.startAdvertising(Self.advertisement)
            let central = try await harness.central { $0.adapter = .name("hci0") }
            // Three centrals one after the other: each finds it and connects (5 s each), and
            // reads the level, as the first did.
            for round in 1...3 {
                let found = try await Self.connect(central, "connectable, round \(round)")
                #expect(try await Self.readLevel(central, found.peripheral) == [94])
                try await central.disconnect(found.peripheral)
            }
            #expect(await manager.isAdvertising)
            // Nothing the app has to handle: no event for the re-registration.
            await manager.close()
            var seen: [String] = []
            for await event in events {
                if case .advertisingStopped(let reason) = event { seen.append(reason) }
            }
            #expect(seen.isEmpty)
            await central.close()
        }
    }

    @Test(
        "a Connect made while the peripheral is not advertising comes up once it advertises again (the gap of a re-registration)"
    )
    func connectDuringAdvertisingGap() async throws {
        try await CentralHarness.run(Self.scenario) { harness in
            let manager = try await Self.peripheral(harness)
            _ = try await manager.add(Self.service)
            try await manager.startAdvertising(Self.advertisement)
            let central = try await harness.central { $0.adapter = .name("hci0") }
            let results = try await central.scan(ScanOptions(services: [BluetoothUUID(0x180F)]))
            let found = try await first(results, within: 10, "advertising") {
                $0.peripheral.address == Self.peripheralAddress
            }
            await manager.stopAdvertising()
            // bluetoothd's create-connection waits for the next connectable advertisement; the
            // simulator's default create-connection timeout (20 s) is longer than this attempt's.
            let connecting = Task {
                try await central.connect(found.peripheral, timeout: .seconds(10), autoReconnect: false)
            }
            try await Task.sleep(for: .milliseconds(500))
            try await manager.startAdvertising(Self.advertisement)
            _ = try await connecting.value
            #expect(try await Self.readLevel(central, found.peripheral) == [94])
            try await central.disconnect(found.peripheral)
            withExtendedLifetime(results) {}
            await manager.close()
            await central.close()
        }
    }

    @Test("updateAdvertisement changes what centrals see; stopAdvertising ends it; too large is refused before BlueZ")
    func advertisingUpdates() async throws {
        try await CentralHarness.run(Self.scenario) { harness in
            let manager = try await Self.peripheral(harness)
            try await manager.startAdvertising(Self.advertisement)
            let central = try await harness.central { $0.adapter = .name("hci0") }
            _ = try await Self.discover(central, "first data") { $0.serviceData[BluetoothUUID(0x180F)] == [0x5E] }
            var changed = Self.advertisement
            changed.serviceData[BluetoothUUID(0x180F)] = [0x5D]
            try await manager.updateAdvertisement(changed)
            _ = try await Self.discover(central, "updated data") { $0.serviceData[BluetoothUUID(0x180F)] == [0x5D] }

            var tooLarge = changed
            tooLarge.localName = "a name far too long for 31 bytes"
            let error = await #expect(throws: PeripheralError.self) { try await manager.updateAdvertisement(tooLarge) }
            #expect(error?.code == .advertisementTooLarge)
            #expect(await manager.advertisement == changed)

            let second = await #expect(throws: PeripheralError.self) { try await manager.startAdvertising(changed) }
            #expect(second?.code == .alreadyExists)

            // A field removed or another kind: registered again.
            let events = await manager.events()
            var beacon = changed
            beacon.kind = .broadcast
            beacon.manufacturerData = [:]
            try await manager.updateAdvertisement(beacon)
            _ = try await first(events, "registered again") {
                if case .advertisingStarted = $0 { return true } else { return false }
            }
            #expect(await manager.isAdvertising)
            #expect(await manager.advertisement == beacon)
            await manager.stopAdvertising()
            #expect(await manager.isAdvertising == false)
            #expect(await manager.advertisement == nil)
            await central.close()
            await manager.close()
        }
    }

    @Test("remove re-registers the rest; calls from anyone but bluetoothd are refused")
    func servicesAndCallers() async throws {
        try await CentralHarness.run(Self.scenario) { harness in
            let manager = try await Self.peripheral(harness)
            let events = await manager.events()
            let battery = try await manager.add(Self.service)
            let other = try await manager.add(
                MutableService(
                    uuid: BluetoothUUID(0x181A),
                    characteristics: [
                        MutableCharacteristic(uuid: BluetoothUUID(0x2A6E), properties: [.read], value: [0x10, 0x09])
                    ]))
            #expect(await manager.services == [battery, other])
            try await manager.remove(battery)
            #expect(await manager.services == [other])
            _ = try await first(events, "registered with one service") {
                if case .servicesRegistered(let services) = $0 { return services == [other] } else { return false }
            }
            let gone = await #expect(throws: PeripheralError.self) {
                try await manager.updateValue([1], for: battery.characteristics[0])
            }
            #expect(gone?.code == .unknownAttribute)
            let reserved = await #expect(throws: PeripheralError.self) {
                try await manager.add(
                    MutableService(
                        uuid: BluetoothUUID(0x1801),
                        characteristics: other.characteristics.map { _ in
                            MutableCharacteristic(uuid: BluetoothUUID(0x2A05), properties: [.indicate])
                        }))
            }
            #expect(reserved?.code == .invalidService)

            // bluetoothd wrote the handles it allocated into the writable Handle properties.
            let client = try await harness.client()
            let objects = try await client.call(
                destination: manager.uniqueBusName, path: "/io/gattway/peripheral/app",
                interface: "org.freedesktop.DBus.ObjectManager",
                method: "GetManagedObjects")
            let handles = (objects.first?.entries ?? []).compactMap { entry -> UInt16? in
                let interfaces = entry.value
                let gatt =
                    interfaces["org.bluez.GattService1"] ?? interfaces["org.bluez.GattCharacteristic1"]
                    ?? interfaces["org.bluez.GattDescriptor1"]
                return gatt?["Handle"]?.uint16
            }
            #expect(handles.count == 2)  // the service and its characteristic
            #expect(!handles.contains(0), "\(handles)")

            // Another client calling ReadValue on the application is not bluetoothd.
            let paths = await client.connection(to: manager)
            let intruder = await #expect(throws: DBusError.self) {
                _ = try await client.call(
                    destination: paths.owner, path: paths.characteristic, interface: "org.bluez.GattCharacteristic1",
                    method: "ReadValue", arguments: [.variantDictionary([String: DBusValue]())])
            }
            #expect(intruder?.name.rawValue == "org.bluez.Error.NotAuthorized")
            await client.close()
            await manager.close()
        }
    }

    static func nextRead(_ events: AsyncStream<PeripheralEvent>) async throws -> ReadRequest {
        let event = try await first(events, "a read request") {
            if case .read = $0 { return true } else { return false }
        }
        guard case .read(let request) = event else { throw TestTimeout(description: "not a read") }
        return request
    }

    static func nextWrite(_ events: AsyncStream<PeripheralEvent>) async throws -> WriteRequest {
        let event = try await first(events, "a write request") {
            if case .write = $0 { return true } else { return false }
        }
        guard case .write(let request) = event else { throw TestTimeout(description: "not a write") }
        return request
    }
}

extension DBusConnection {
    /// The unique name of `manager`'s connection and its first characteristic's path, found
    /// through the application's ObjectManager like bluetoothd does.
    func connection(to manager: PeripheralManager) async -> (owner: String, characteristic: DBusObjectPath) {
        let owner = manager.uniqueBusName
        let reply = try? await call(
            destination: owner, path: "/io/gattway/peripheral/app", interface: "org.freedesktop.DBus.ObjectManager",
            method: "GetManagedObjects")
        let path =
            reply?.first?.entries?.compactMap { entry -> DBusObjectPath? in
                guard entry.value["org.bluez.GattCharacteristic1"] != nil else { return nil }
                return entry.key.objectPath
            }.first ?? "/"
        return (owner, path)
    }
}
