import BlueZ
import BlueZSimulator
import Bluetooth
import Foundation
import MQTT
import TestSupport
import Testing

/// One `gattway run` with `role: both`: the central on hci0 reads a simulated battery sensor and
/// publishes its readings, while the peripheral on hci1 serves the same reading back over BLE
/// (its characteristic follows the sensor's state topic) to a phone on hci2, linked to hci1.
@Suite("End to end: role both")
struct BothRolesTests {
    static let gatewayRadio = BluetoothAddress("00:AA:02:00:00:00")!

    static let scenario = """
        {"adapters": [{"name": "hci0", "address": "00:AA:01:00:00:00"}, {"name": "hci1", "address": "00:AA:02:00:00:00"},
                      {"name": "hci2", "address": "00:AA:03:00:00:00"}],
         "links": [{"adapters": ["hci1", "hci2"], "interval": "20ms"}],
         "timing": {"disconnect_delay": "50ms", "resolve_delay": "10ms", "gatt_latency": 0},
         "devices": [
           {"address": "A4:C1:38:00:00:01", "name": "Battery Sensor", "adapter": "hci0", "interval": "100ms",
            "service_uuids": ["180F"],
            "gatt": [{"uuid": "180F", "characteristics": [
              {"uuid": "2A19", "flags": ["read", "notify"], "value": {"number": 77, "format": "u8"}}]}]}
         ]}
        """

    static let config = """
        {"mqtt": {"server": "$SERVER", "base_topic": "gattway"},
         "bluetooth": {"adapter": "hci0"},
         "homeassistant": {"enabled": false}, "health": {"interval": "1s"},
         "role": "both",
         "devices": [{"match": {"address": "A4:C1:38:00:00:01"}, "name": "battery_sensor", "connect": true,
                      "subscribe": [{"service": "180F", "characteristic": "2A19"}]}],
         "peripheral": {
           "adapter": "hci1",
           "advertising": {"local_name": "gw-both", "service_uuids": ["180F"]},
           "services": [{"uuid": "180F", "characteristics": [
             {"uuid": "2A19", "properties": ["read", "notify"], "from_topic": "gattway/battery_sensor",
              "json_key": "battery", "encoding": "u8", "value": 0}]}]}}
        """

    @Test(
        "scanning and serving at once: the sensor's reading is published from hci0 and served on hci1 to a phone on hci2, notified as it changes"
    )
    func relay() async throws {
        let scenario = try Scenario.parse(Data(Self.scenario.utf8))
        try await EndToEnd.run(config: Self.config, scenario: scenario) { e2e in
            // The central side: the sensor connected and subscribed; what it notifies is published
            // (notified until the subscription is up: the simulator refuses a value nobody
            // subscribed to).
            let simulator = e2e.simulator
            let messages = e2e.messages
            try await eventually("the sensor's reading published", within: 30) {
                try? await simulator.notify(address: "A4:C1:38:00:00:01", uuid: "2A19", [77])
                try await Task.sleep(for: .milliseconds(200))
                return messages.messages(on: EndToEnd.topic("battery_sensor")).contains { $0.number("battery") == 77 }
            }

            // The peripheral side, seen by a phone on hci2.
            let phone = try await CentralManager.start(
                options: CentralOptions(adapter: .name("hci2")), bus: .address(e2e.daemon.address), on: e2e.loop)
            defer { Task { await phone.close() } }
            try await phone.waitUntilPoweredOn(timeout: .seconds(30))
            let scan = try await phone.scan(ScanOptions(services: [BluetoothUUID(0x180F)], allowDuplicates: true))
            let found = try await first(scan, within: 60, "the gateway's advertisement") {
                $0.peripheral.address == Self.gatewayRadio
            }
            #expect(found.advertisementData.localName == "gw-both")
            try await phone.connect(found.peripheral, timeout: .seconds(30), autoReconnect: false)
            let service = try #require(
                try await phone.discoverServices([BluetoothUUID(0x180F)], for: found.peripheral).first)
            let level = try #require(
                try await phone.discoverCharacteristics([BluetoothUUID(0x2A19)], for: service).first)
            // The sensor's reading, relayed: read, then notified when the sensor's value changes.
            try await eventually("the served value to follow the sensor", within: 30) {
                try await phone.readValue(for: level) == [77]
            }
            let values = try await phone.notifications(for: level)
            try await e2e.messages.next(on: "gattway/bridge/health", timeout: 90) {
                $0.json?["peripheral"]?["subscriptions"] == .number(1)
            }
            try await e2e.simulator.notify(address: "A4:C1:38:00:00:01", uuid: "2A19", [42])
            #expect(try await first(values, within: 30, "the relayed notification") == [42])
            try await phone.disconnect(found.peripheral)
        }
    }

    @Test(
        "the peripheral's adapter powered off at start: READY at once; its services and advertisement are registered by themselves once it is powered on"
    )
    func peripheralAdapterOffAtStart() async throws {
        var scenario = try Scenario.parse(Data(Self.scenario.utf8))
        scenario.adapters[1].powered = false
        let directory = try TemporaryDirectory.make(prefix: "both")
        defer { try? FileManager.default.removeItem(at: directory) }
        let socket = try NotifySocketServer(path: directory.appendingPathComponent("notify").path)
        try await EndToEnd.run(
            config: Self.config, scenario: scenario, environment: ["NOTIFY_SOCKET": socket.path]
        ) { e2e in
            try await socket.next(containing: "READY=1", within: 10)
            #expect(e2e.gateway.log().contains("BlueZ: hci1 (peripheral) is poweredOff"), "\(e2e.gateway.log())")
            #expect(e2e.gateway.isRunning, "gattway run exited")
            let phone = try await CentralManager.start(
                options: CentralOptions(adapter: .name("hci2")), bus: .address(e2e.daemon.address), on: e2e.loop)
            do {
                try await phone.waitUntilPoweredOn(timeout: .seconds(30))
                await e2e.simulator.setPowered(adapter: "hci1", true)
                let scan = try await phone.scan(ScanOptions(services: [BluetoothUUID(0x180F)], allowDuplicates: true))
                let found = try await first(scan, within: 60, "the gateway's advertisement") {
                    $0.peripheral.address == Self.gatewayRadio
                }
                #expect(found.advertisementData.localName == "gw-both")
                try await phone.connect(found.peripheral, timeout: .seconds(30), autoReconnect: false)
                let services = try await phone.discoverServices([BluetoothUUID(0x180F)], for: found.peripheral)
                #expect(services.count == 1, "the served 180F after the power-on")
                try await phone.disconnect(found.peripheral)
            } catch {
                await phone.close()
                throw error
            }
            await phone.close()
        }
    }
}
