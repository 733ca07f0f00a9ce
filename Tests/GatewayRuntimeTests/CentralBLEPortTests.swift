import BlueZ
import BlueZSimulator
import Bluetooth
import EventLoop
import Foundation
import Gateway
import GatewayRuntime
import TestSupport
import Testing

/// The gateway's BLE port over a real `CentralManager`, against the BlueZ simulator on a
/// private bus (dbus-daemon started by the test), as the core uses it.
@Suite("CentralBLEPort against the BlueZ simulator on a private bus")
struct CentralBLEPortTests {
    static let sensor = BluetoothAddress("A4:C1:38:00:00:01")!
    static let beacon = BluetoothAddress("A4:C1:38:00:00:07")!
    static let battery = BLECharacteristic(
        service: BluetoothUUID(0x180F), uuid: BluetoothUUID(0x2A19), properties: [.read, .notify])
    static let scenario = """
        {
          "timing": {"disconnect_delay": "50ms", "temporary_timeout": "30s", "resolve_delay": "10ms", "gatt_latency": 0},
          "adapters": [{"name": "hci0", "address": "00:AA:01:00:00:00"}],
          "devices": [
            {"address": "A4:C1:38:00:00:01", "name": "Battery Sensor", "rssi": -58, "interval": "20ms", "service_uuids": ["180F"],
             "service_data": {"180F": {"hex": "64"}},
             "gatt": [{"uuid": "180F", "characteristics": [
                {"uuid": "2A19", "flags": ["read", "notify"], "value": {"number": 94, "format": "u8"},
                 "notify": {"every": "20ms", "value": {"number": {"counter": {"start": 93, "step": -1, "min": 0, "max": 100}}, "format": "u8"}}}]}]},
            {"address": "A4:C1:38:00:00:07", "rssi": -70, "interval": "20ms", "connectable": false,
             "service_data": {"FCD2": {"template": "bthome_v2"}}}
          ]
        }
        """

    /// A private bus with the simulator on it and a started central; everything stopped after `body`.
    static func withPort(_ body: (CentralBLEPort) async throws -> Void) async throws {
        let daemon = try await DBusDaemon()
        defer { daemon.stop() }
        let loop = EventLoop(name: "runtime-test")
        defer { loop.shutdown() }
        let simulator = try await BlueZSimulator.start(
            scenario: try Scenario.parse(Data(scenario.utf8)), bus: .address(daemon.address), on: loop)
        let central = try await CentralManager.start(bus: .address(daemon.address), on: loop)
        do {
            try await body(CentralBLEPort(central: central))
        } catch {
            await central.close()
            await simulator.stop()
            throw error
        }
        await central.close()
        await simulator.stop()
    }

    @Test(
        "scan: each device's advertisements reach the handler with its address and data; after cancel no more come; the adapter's condition comes as an event"
    )
    func scan() async throws {
        try await Self.withPort { port in
            let events = Recorded<BLEConnectionEvent>()
            let links = await port.connectionEvents { events.append($0) }
            let seen = Recorded<BLEDiscovery>()
            let registration = try await port.scan(services: []) { seen.append($0) }
            try await eventually("both devices are seen", within: 30) {
                Set(seen.all.map(\.address)).isSuperset(of: [Self.sensor, Self.beacon])
            }
            let sensor = try #require(seen.all.first { $0.address == Self.sensor })
            #expect(sensor.advertisement.localName == "Battery Sensor")
            #expect(sensor.advertisement.serviceData[BluetoothUUID(0x180F)] == [0x64])
            try await eventually("the adapter's condition", within: 30) {
                events.all.contains { if case .adapter(let status) = $0 { status.usable } else { false } }
            }
            registration.cancel()
            try await Task.sleep(for: .milliseconds(300))
            let count = seen.count
            try await Task.sleep(for: .milliseconds(300))
            #expect(seen.count == count, "no advertisements after the scan ended")
            links.cancel()
        }
    }

    @Test(
        "connect, discover, read and notifications through the port, the link's changes as events; a missing characteristic is notFound"
    )
    func link() async throws {
        try await Self.withPort { port in
            let events = Recorded<BLEConnectionEvent>()
            let links = await port.connectionEvents { events.append($0) }
            let scan = try await port.scan(services: []) { _ in }
            // BlueZ knows the device once the scan has seen it.
            try await eventually("the sensor is known", within: 30) {
                (try? await port.connect(Self.sensor, timeout: 10)) != nil
            }
            scan.cancel()
            try await eventually("connected as an event", within: 30) {
                events.all.contains {
                    if case .connected(let found) = $0 { found.address == Self.sensor } else { false }
                }
            }
            let characteristics = try await port.discover(Self.sensor, services: nil)
            #expect(characteristics.contains { $0.service == Self.battery.service && $0.uuid == Self.battery.uuid })
            #expect(try await port.read(Self.sensor, characteristic: Self.battery) == [94])
            let values = Recorded<[UInt8]>()
            let subscription = try await port.notifications(Self.sensor, characteristic: Self.battery) {
                values.append($0)
            }
            try await eventually("three notifications", within: 30) { values.count >= 3 }
            #expect(values.all.prefix(3) == [[93], [92], [91]])
            subscription.cancel()
            let missing = BLECharacteristic(
                service: BluetoothUUID(0x180F), uuid: BluetoothUUID(0x2A00), properties: [.read])
            do throws(BLEPortError) {
                _ = try await port.read(Self.sensor, characteristic: missing)
                Issue.record("a characteristic the device does not have was read")
            } catch {
                #expect(error.kind == .notFound, "\(error)")
            }
            await port.disconnect(Self.sensor)
            try await eventually("disconnected as an event", within: 30) {
                events.all.contains {
                    if case .disconnected(let address, _) = $0 { address == Self.sensor } else { false }
                }
            }
            links.cancel()
        }
    }
}
