import BlueZ
import BlueZSimulator
import Bluetooth
import EventLoop
import Foundation
import Gateway
import GatewayRuntime
import TestSupport
import Testing

/// The gateway's peripheral port over a real `PeripheralManager` on hci1, against the BlueZ
/// simulator on a private bus, with a real `CentralManager` on the linked hci0 as the remote
/// central (docs/simulator.md "links" and "Peripheral role").
///
/// `PeripheralPort.events(_:)` returns no registration to cancel: the port's deliveries end when
/// its manager closes, so that is what ``deliveriesEndWithTheManager()`` checks.
@Suite("PeripheralBLEPort against the BlueZ simulator on a private bus")
struct PeripheralBLEPortTests {
    static let centralAddress = BluetoothAddress("00:AA:01:00:00:00")!
    static let peripheralAddress = BluetoothAddress("00:AA:02:00:00:00")!
    static let scenario = """
        {
          "timing": {"disconnect_delay": "50ms", "temporary_timeout": "30s", "resolve_delay": "10ms", "gatt_latency": 0},
          "adapters": [{"name": "hci0", "address": "00:AA:01:00:00:00"}, {"name": "hci1", "address": "00:AA:02:00:00:00"}],
          "links": [{"adapters": ["hci0", "hci1"], "interval": "20ms"}],
          "devices": []
        }
        """

    static let battery = BluetoothUUID(0x180F)
    static let custom = BluetoothUUID(0xFFF0)
    /// services[0]: battery level (read, notify), a write-request and a write-command
    /// characteristic; services[1]: an indicate characteristic.
    static let services = [
        PeripheralService(
            uuid: battery,
            characteristics: [
                PeripheralCharacteristic(uuid: BluetoothUUID(0x2A19), properties: [.read, .notify], value: [94]),
                PeripheralCharacteristic(uuid: BluetoothUUID(0xFF02), properties: [.write]),
                PeripheralCharacteristic(uuid: BluetoothUUID(0xFF01), properties: [.writeWithoutResponse]),
            ]),
        PeripheralService(
            uuid: custom,
            characteristics: [
                PeripheralCharacteristic(uuid: BluetoothUUID(0xFFF1), properties: [.read, .indicate], value: [1])
            ]),
    ]
    static let level = PeripheralCharacteristicID(service: 0, characteristic: 0)
    static let request = PeripheralCharacteristicID(service: 0, characteristic: 1)
    static let command = PeripheralCharacteristicID(service: 0, characteristic: 2)
    static let advertisement = PeripheralAdvertisement(
        data: AdvertisementData(localName: "gw-port", serviceUUIDs: [battery]))

    /// What a test gets: the port on hci1, its manager, and a central on hci0.
    struct Setup {
        let port: PeripheralBLEPort
        let manager: PeripheralManager
        let central: CentralManager
    }

    /// A private bus with the simulator, a powered peripheral manager on hci1 behind the port,
    /// and a central on hci0; everything stopped after `body`.
    static func withPort(_ body: (Setup) async throws -> Void) async throws {
        let daemon = try await DBusDaemon()
        defer { daemon.stop() }
        let loop = EventLoop(name: "peripheral-port-test")
        defer { loop.shutdown() }
        let simulator = try await BlueZSimulator.start(
            scenario: try Scenario.parse(Data(scenario.utf8)), bus: .address(daemon.address), on: loop)
        let manager = try await PeripheralManager.start(
            options: PeripheralOptions(adapter: .name("hci1")), bus: .address(daemon.address), on: loop)
        var options = CentralOptions()
        options.adapter = .name("hci0")
        let central = try await CentralManager.start(options: options, bus: .address(daemon.address), on: loop)
        do {
            try await manager.waitUntilPoweredOn(timeout: .seconds(30))
            try await central.waitUntilPoweredOn(timeout: .seconds(30))
            let port = await PeripheralBLEPort(manager: manager, log: GatewayLogger { _, _ in })
            try await body(Setup(port: port, manager: manager, central: central))
        } catch {
            await central.close()
            await manager.close()
            await simulator.stop()
            throw error
        }
        await central.close()
        await manager.close()
        await simulator.stop()
    }

    /// Records the port's events, serves ``services``, advertises and connects the central to it.
    static func serveAndConnect(
        _ setup: Setup
    ) async throws -> (Recorded<PeripheralPortEvent>, Peripheral, [BluetoothUUID: Characteristic]) {
        let events = Recorded<PeripheralPortEvent>()
        setup.port.events { events.append($0) }
        try await setup.port.serve(services)
        try await setup.port.advertise(advertisement)
        let (peripheral, characteristics) = try await connect(setup.central)
        return (events, peripheral, characteristics)
    }

    /// Finds the port's advertisement from hci0 and connects while still scanning (BlueZ drops a
    /// temporary device it no longer sees), then discovers the served characteristics by UUID.
    static func connect(_ central: CentralManager) async throws -> (Peripheral, [BluetoothUUID: Characteristic]) {
        let results = try await central.scan(ScanOptions(services: [battery]))
        let found = try await first(results, within: 30, "the port's advertisement") {
            $0.peripheral.address == peripheralAddress
        }
        try await central.connect(found.peripheral, timeout: .seconds(30), autoReconnect: false)
        withExtendedLifetime(results) {}
        var characteristics: [BluetoothUUID: Characteristic] = [:]
        for service in try await central.discoverServices([battery, custom], for: found.peripheral) {
            for characteristic in try await central.discoverCharacteristics(for: service) {
                characteristics[characteristic.uuid] = characteristic
            }
        }
        return (found.peripheral, characteristics)
    }

    @Test(
        "the served services are what a central on the linked adapter discovers: service and characteristic UUIDs, properties"
    )
    func served() async throws {
        try await Self.withPort { setup in
            try await setup.port.serve(Self.services)
            try await setup.port.advertise(Self.advertisement)
            let (peripheral, _) = try await Self.connect(setup.central)
            let services = try await setup.central.discoverServices(nil, for: peripheral)
            let ours = services.filter { [Self.battery, Self.custom].contains($0.uuid) }
            #expect(Set(ours.map(\.uuid)) == [Self.battery, Self.custom])
            var properties: [BluetoothUUID: CharacteristicProperties] = [:]
            for service in ours {
                for characteristic in try await setup.central.discoverCharacteristics(for: service) {
                    properties[characteristic.uuid] = characteristic.properties
                }
            }
            #expect(
                Set(properties.keys) == [
                    BluetoothUUID(0x2A19), BluetoothUUID(0xFF02), BluetoothUUID(0xFF01), BluetoothUUID(0xFFF1),
                ])
            #expect(properties[BluetoothUUID(0x2A19)]?.isSuperset(of: [.read, .notify]) == true)
            #expect(properties[BluetoothUUID(0x2A19)]?.contains(.write) == false)
            #expect(properties[BluetoothUUID(0xFF02)]?.contains(.write) == true)
            #expect(properties[BluetoothUUID(0xFF02)]?.contains(.read) == false)
            #expect(properties[BluetoothUUID(0xFF01)]?.contains(.writeWithoutResponse) == true)
            #expect(properties[BluetoothUUID(0xFFF1)]?.isSuperset(of: [.read, .indicate]) == true)
            try await setup.central.disconnect(peripheral)
        }
    }

    @Test(
        "a value set through the port is what the central reads; a later one reaches the subscribed central as a notification"
    )
    func valuesAndNotifications() async throws {
        try await Self.withPort { setup in
            let (events, peripheral, characteristics) = try await Self.serveAndConnect(setup)
            let level = try #require(characteristics[BluetoothUUID(0x2A19)])
            #expect(try await setup.central.readValue(for: level) == [94], "the value the service was served with")
            await setup.port.setValue([80], for: Self.level)
            #expect(try await setup.central.readValue(for: level) == [80])

            let values = try await setup.central.notifications(for: level)
            try await eventually("subscribed", within: 30) {
                events.all.contains(.subscribed(Self.level, central: nil))
            }
            await setup.port.setValue([79], for: Self.level)
            #expect(try await first(values, within: 30, "the notification") { _ in true } == [79])
            await setup.port.setValue([78], for: Self.level)
            #expect(try await first(values, within: 30, "the next notification") { _ in true } == [78])
            try await setup.central.disconnect(peripheral)
        }
    }

    @Test(
        "a central's write request and write command reach the port's handler with the bytes and the central's address; its subscribe and unsubscribe are reported"
    )
    func writesAndSubscriptions() async throws {
        try await Self.withPort { setup in
            let (events, peripheral, characteristics) = try await Self.serveAndConnect(setup)

            try await setup.central.writeValue(
                [1, 2, 3], for: try #require(characteristics[BluetoothUUID(0xFF02)]), type: .withResponse)
            try await eventually("the write request", within: 30) {
                events.all.contains(.write(Self.request, value: [1, 2, 3], central: Self.centralAddress))
            }
            try await setup.central.writeValue(
                [9], for: try #require(characteristics[BluetoothUUID(0xFF01)]), type: .withoutResponse)
            try await eventually("the write command", within: 30) {
                events.all.contains(.write(Self.command, value: [9], central: Self.centralAddress))
            }
            #expect(
                events.all.filter { if case .write = $0 { true } else { false } } == [
                    .write(Self.request, value: [1, 2, 3], central: Self.centralAddress),
                    .write(Self.command, value: [9], central: Self.centralAddress),
                ])

            // Subscribing: the consumer of the central's notifications; unsubscribing: it stops.
            let values = try await setup.central.notifications(
                for: try #require(characteristics[BluetoothUUID(0x2A19)]))
            let consumer = Task { for try await _ in values {} }
            try await eventually("subscribed", within: 30) {
                events.all.contains(.subscribed(Self.level, central: nil))
            }
            #expect(!events.all.contains(.unsubscribed(Self.level, central: nil)))
            consumer.cancel()
            try await eventually("unsubscribed", within: 30) {
                events.all.contains(.unsubscribed(Self.level, central: nil))
            }
            try await setup.central.disconnect(peripheral)
        }
    }

    @Test(
        "advertising through the port is seen by a scan on the linked adapter (name, service UUID), a new advertisement replaces it, and stopping ends it"
    )
    func advertising() async throws {
        try await Self.withPort { setup in
            try await setup.port.advertise(Self.advertisement)
            let results = try await setup.central.scan(ScanOptions(services: [Self.battery], allowDuplicates: true))
            let found = try await first(results, within: 30, "the advertisement") {
                $0.peripheral.address == Self.peripheralAddress
            }
            #expect(found.advertisementData.localName == "gw-port")
            #expect(found.advertisementData.serviceUUIDs.contains(Self.battery))

            var changed = Self.advertisement
            changed.data.localName = "gw-port-2"
            try await setup.port.advertise(changed)
            _ = try await first(results, within: 30, "the new advertisement") {
                $0.peripheral.address == Self.peripheralAddress && $0.advertisementData.localName == "gw-port-2"
            }

            // Still advertising: reports keep coming (the control for the check below).
            let seen = Recorded<ScanResult>()
            let collector = Task {
                for await result in results where result.peripheral.address == Self.peripheralAddress {
                    seen.append(result)
                }
            }
            try await eventually("reports keep coming while advertising", within: 30) { seen.count >= 3 }

            try await setup.port.advertise(nil)
            // Reports already under way may still arrive; then a whole second passes without one
            // (while advertising there is one every 20 ms).
            try await eventually("no more reports after stopping", within: 30) {
                let count = seen.count
                try await Task.sleep(for: .seconds(1))
                return seen.count == count
            }
            collector.cancel()

            // Advertising again works (the port knows it had stopped).
            try await setup.port.advertise(Self.advertisement)
            try await eventually("advertising again", within: 30) {
                try await Self.scanOnce(setup.central, name: "gw-port")
            }
            withExtendedLifetime(results) {}
        }
    }

    /// Whether a fresh scan sees the port's advertisement with `name`.
    static func scanOnce(_ central: CentralManager, name: String) async throws -> Bool {
        let results = try await central.scan(ScanOptions(services: [battery], allowDuplicates: true))
        let found = try? await first(results, within: 5, "the advertisement named \(name)") {
            $0.peripheral.address == peripheralAddress && $0.advertisementData.localName == name
        }
        return found != nil
    }

    @Test(
        "the port's deliveries end with its manager: after close a central's write reaches no handler (PeripheralPort.events has no cancel of its own)"
    )
    func deliveriesEndWithTheManager() async throws {
        try await Self.withPort { setup in
            let (events, _, characteristics) = try await Self.serveAndConnect(setup)
            let writable = try #require(characteristics[BluetoothUUID(0xFF02)])
            try await setup.central.writeValue([1], for: writable, type: .withResponse)
            try await eventually("the first write", within: 30) {
                events.all.contains(.write(Self.request, value: [1], central: Self.centralAddress))
            }

            await setup.manager.close()
            await #expect(throws: (any Error).self, "a write to a closed port's characteristic succeeded") {
                try await setup.central.writeValue([2], for: writable, type: .withResponse)
            }
            try await Task.sleep(for: .seconds(1))
            #expect(events.all == [.write(Self.request, value: [1], central: Self.centralAddress)])
        }
    }
}
