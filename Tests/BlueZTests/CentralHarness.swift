import BlueZ
import BlueZSimulator
import Bluetooth
import DBus
import EventLoop
import Foundation
import Retry
import TestSupport
import Testing

/// A private dbus-daemon, a loop, a simulator from a scenario, and helpers to start central
/// managers on that bus. `run` always stops everything (also when the body throws).
struct CentralHarness {
    let daemon: DBusDaemon
    let loop: EventLoop
    let simulator: BlueZSimulator?
    let bus: DBusConnection.Bus
    /// The simulator's management protocol socket (`run(_:managementSocket: true)`), in the daemon's directory.
    let managementSocket: String?

    /// - Parameter managementSocket: the simulator also serves the kernel's management protocol,
    ///   at ``managementSocket`` (`mgmt` in the test's scratch directory).
    static func run(
        _ json: String?, managementSocket: Bool = false, _ body: (CentralHarness) async throws -> Void
    ) async throws {
        let daemon = try await DBusDaemon()
        let loop = EventLoop(name: "central-test")
        var simulator: BlueZSimulator? = nil
        let socketPath = managementSocket && json != nil ? daemon.directory.appendingPathComponent("mgmt").path : nil
        do {
            if let json {
                simulator = try await BlueZSimulator.start(
                    scenario: try Scenario.parse(Data(json.utf8)), bus: .address(daemon.address), on: loop,
                    managementSocket: socketPath)
            }
            try await body(
                CentralHarness(
                    daemon: daemon, loop: loop, simulator: simulator, bus: .address(daemon.address),
                    managementSocket: socketPath))
        } catch {
            await simulator?.stop()
            loop.shutdown()
            daemon.stop()
            throw error
        }
        await simulator?.stop()
        loop.shutdown()
        daemon.stop()
    }

    var sim: BlueZSimulator {
        get throws {
            guard let simulator else { throw TestTimeout(description: "no simulator in this harness") }
            return simulator
        }
    }

    /// A central on the harness bus; fast reconnects so tests never wait out production backoff.
    func central(_ configure: (inout CentralOptions) -> Void = { _ in }) async throws -> CentralManager {
        var options = CentralOptions()
        var reconnect = ReconnectPolicy<SystemRandomNumberGenerator>.Configuration()
        reconnect.firstDelay = 0.05...0.1
        reconnect.maximumDelay = 0.3
        options.reconnect = reconnect
        options.discoveryRetryDelay = 0.05
        options.discoveryRetryMaximum = 0.2
        configure(&options)
        return try await CentralManager.start(options: options, bus: bus, on: loop)
    }

    /// A plain D-Bus client for checks behind the central's back.
    func client() async throws -> DBusConnection {
        try await DBusConnection.connect(to: bus, on: loop)
    }
}

enum Scenarios {
    /// BlueZ's own 30 s TemporaryTimeout: no test here waits for a device to expire, and a short one
    /// removed the device between the end of a scan and Connect on a loaded machine (UnknownObject).
    static let timing =
        #""timing": {"disconnect_delay": "50ms", "temporary_timeout": "30s", "resolve_delay": "10ms", "gatt_latency": 0}"#
    static let battery = BluetoothAddress("A4:C1:38:00:00:01")!
    static let heartRate = BluetoothAddress("A4:C1:38:00:00:06")!
    /// What a scan reports of the battery sensor in ``sensors(batteryFaults:events:notifyEvery:startDiscoveryFailures:)``.
    static let batteryAdvertisement = AdvertisementData(
        localName: "Battery Sensor", serviceUUIDs: [BluetoothUUID(0x180F)],
        manufacturerData: [0xFFFF: [0x52, 0x42, 0x5A, 0x31]],
        serviceData: [BluetoothUUID(0x180F): [0x64]], txPower: 4, rssi: -58)

    static func sensors(
        batteryFaults: String = "", events: String = "", notifyEvery: String = "20ms", startDiscoveryFailures: Int = 0,
        batteryPairing: String = "just_works"
    ) -> String {
        """
        {
          \(timing),
          "adapters": [{"name": "hci0", "address": "00:AA:01:00:00:00", "start_discovery_failures": \(startDiscoveryFailures)}],
          "devices": [
            {"address": "A4:C1:38:00:00:01", "name": "Battery Sensor", "rssi": -58, "interval": "20ms", "service_uuids": ["180F"],
             "manufacturer_data": {"0xffff": {"hex": "52425a31"}}, "service_data": {"180F": {"hex": "64"}}, "tx_power": 4,
             "pairing": "\(batteryPairing)",
             \(batteryFaults.isEmpty ? "" : "\"faults\": {\(batteryFaults)},")
             "gatt": [{"uuid": "180F", "characteristics": [
                {"uuid": "2A19", "flags": ["read", "notify"], "value": {"number": 94, "format": "u8"},
                 "notify": {"every": "\(notifyEvery)", "value": {"number": {"counter": {"start": 93, "step": -1, "min": 0, "max": 100}}, "format": "u8"}},
                 "descriptors": [{"uuid": "2901", "value": {"utf8": "Level"}}]}]},
               {"uuid": "ff00", "characteristics": [
                {"uuid": "ff01", "flags": ["write", "write-without-response"], "reflect_writes_to": "ff02"},
                {"uuid": "ff02", "flags": ["read", "notify"], "value": {"hex": "00"}},
                {"uuid": "ff03", "flags": ["read"], "read_error": 128},
                {"uuid": "ff04", "flags": ["write"], "write_error": 13},
                {"uuid": "ff05", "flags": ["read"], "value": {"utf8": "hello world"}}]}]},
            {"address": "A4:C1:38:00:00:06", "name": "HR Strap", "rssi": -61, "interval": "20ms", "service_uuids": ["180D"]},
            {"address": "A4:C1:38:00:00:07", "rssi": -70, "interval": "20ms", "connectable": false, "discoverable": false,
             "service_data": {"FCD2": {"template": "bthome_v2"}}}
          ],
          "events": [\(events)]
        }
        """
    }
}

extension CentralManager {
    /// Scans for the battery sensor until BlueZ knows it.
    func findBattery(services: [BluetoothUUID] = [BluetoothUUID(0x180F)]) async throws -> Peripheral {
        let results = try scan(ScanOptions(services: services))
        return try await first(results, "battery sensor found") { $0.peripheral.address == Scenarios.battery }
            .peripheral
    }

    /// Finds, connects and resolves the battery sensor; returns its characteristics by UUID.
    func connectBattery(autoReconnect: Bool = true) async throws -> (Peripheral, [BluetoothUUID: Characteristic]) {
        let peripheral = try await findBattery()
        try await connect(peripheral, timeout: .seconds(30), autoReconnect: autoReconnect)
        var characteristics: [BluetoothUUID: Characteristic] = [:]
        for service in try await discoverServices(for: peripheral) {
            for characteristic in try discoverCharacteristics(for: service) {
                characteristics[characteristic.uuid] = characteristic
            }
        }
        return (peripheral, characteristics)
    }
}
