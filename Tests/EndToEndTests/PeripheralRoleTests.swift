import BlueZ
import BlueZSimulator
import Bluetooth
import Foundation
import MQTT
import TestSupport
import Testing

/// `gattway run` in the peripheral role on hci1 of the simulator, and a phone played by
/// gattway's CentralManager on hci0 (the simulator links the two adapters like `btvirt -l2`):
/// gateway data read and notified over BLE, BLE writes published on MQTT.
@Suite("End to end: peripheral role")
struct PeripheralRoleTests {
    static let phone = BluetoothAddress("00:AA:01:00:00:00")!
    static let gatewayRadio = BluetoothAddress("00:AA:02:00:00:00")!
    static let lampService = BluetoothUUID("6e400001-b5a3-f393-e0a9-e50e24dcca9e")!
    static let lampCharacteristic = BluetoothUUID("6e400002-b5a3-f393-e0a9-e50e24dcca9e")!

    static let scenario = """
        {"adapters": [{"name": "hci0", "address": "00:AA:01:00:00:00"}, {"name": "hci1", "address": "00:AA:02:00:00:00"}],
         "links": [{"adapters": ["hci0", "hci1"], "interval": "20ms"}],
         "timing": {"disconnect_delay": "50ms", "resolve_delay": "10ms", "gatt_latency": 0},
         "devices": []}
        """

    static let config = """
        {"mqtt": {"server": "$SERVER", "base_topic": "gattway"},
         "bluetooth": {"adapter": "hci0"},
         "homeassistant": {"enabled": false}, "health": {"interval": "1s"},
         "role": "peripheral",
         "peripheral": {
           "adapter": "hci1",
           "advertising": {"local_name": "gw-e2e", "service_uuids": ["181A"],
                           "service_data": [{"uuid": "181A", "from_topic": "home/beacon", "value": "00"}]},
           "services": [
             {"uuid": "181A", "characteristics": [
               {"uuid": "2A6E", "properties": ["read", "notify"], "from_topic": "home/livingroom/state",
                "json_key": "temperature", "encoding": "s16le", "scale": 100, "value": 20}]},
             {"uuid": "6e400001-b5a3-f393-e0a9-e50e24dcca9e", "characteristics": [
               {"uuid": "6e400002-b5a3-f393-e0a9-e50e24dcca9e", "properties": ["read", "write", "write-without-response"],
                "to_topic": "phone/lamp", "encoding": "u8", "value": 0}]}
           ]}}
        """

    @Test(
        "a central reads and is notified of MQTT values, its writes arrive on MQTT with its address, advertised data follows MQTT"
    )
    func phoneRoundTrip() async throws {
        let scenario = try Scenario.parse(Data(Self.scenario.utf8))
        try await EndToEnd.run(config: Self.config, scenario: scenario) { e2e in
            let central = try await CentralManager.start(
                options: CentralOptions(adapter: .name("hci0")), bus: .address(e2e.daemon.address), on: e2e.loop)
            defer { Task { await central.close() } }
            try await central.waitUntilPoweredOn(timeout: .seconds(30))

            // The gateway's advertisement: name, service UUID, service data as configured.
            let scan = try await central.scan(ScanOptions(services: [BluetoothUUID(0x181A)], allowDuplicates: true))
            let found = try await first(scan, within: 60, "the gateway's advertisement") {
                $0.peripheral.address == Self.gatewayRadio
            }
            #expect(found.advertisementData.localName == "gw-e2e")
            #expect(found.advertisementData.serviceData[BluetoothUUID(0x181A)] == [0x00])

            // Advertised service data follows its topic (published retained, as state topics are:
            // the gateway's subscription may still be on its way to the broker).
            try await e2e.observer.publish(MQTTMessage(topic: "home/beacon", string: "4002ca09", retain: true))
            _ = try await first(scan, within: 60, "the advertisement with the MQTT service data") {
                $0.peripheral.address == Self.gatewayRadio
                    && $0.advertisementData.serviceData[BluetoothUUID(0x181A)] == [0x40, 0x02, 0xCA, 0x09]
            }

            try await central.connect(found.peripheral, timeout: .seconds(30), autoReconnect: false)
            var characteristics: [BluetoothUUID: Characteristic] = [:]
            for service in try await central.discoverServices(nil, for: found.peripheral) {
                for characteristic in try await central.discoverCharacteristics(for: service) {
                    characteristics[characteristic.uuid] = characteristic
                }
            }
            let temperature = try #require(characteristics[BluetoothUUID(0x2A6E)], "served: \(characteristics.keys)")
            let lamp = try #require(characteristics[Self.lampCharacteristic])

            // The configured initial value, then the value of the MQTT state topic.
            #expect(try await central.readValue(for: temperature) == [0xD0, 0x07], "20 °C × 100")
            let values = try await central.notifications(for: temperature)
            // BlueZ answers the central's CCCD write without waiting for the application's
            // StartNotify, so wait until the gateway counts the subscription (bridge/health).
            try await e2e.messages.next(on: "gattway/bridge/health") {
                $0.json?["peripheral"]?["subscriptions"] == .number(1)
            }
            try await e2e.send("home/livingroom/state", #"{"temperature": 21.5, "humidity": 40}"#)
            let notified = try await first(values, within: 60, "the notification of 21.5 °C")
            #expect(notified == [0x66, 0x08], "2150 little endian")
            #expect(try await central.readValue(for: temperature) == [0x66, 0x08])

            // A payload that does not fit changes nothing; the next good one notifies.
            try await e2e.send("home/livingroom/state", #"{"temperature": "warm"}"#)
            try await e2e.send("home/livingroom/state", #"{"temperature": -3.25}"#)
            #expect(try await first(values, within: 60, "the notification of -3.25 °C") == [0xBB, 0xFE])

            // Writes from the phone arrive on MQTT with its address, with and without response.
            var mark = e2e.messages.count
            try await central.writeValue([1], for: lamp, type: .withResponse)
            let on = try await e2e.messages.next(on: "phone/lamp", after: mark)
            #expect(on.string("central") == Self.phone.description, "\(on.text)")
            #expect(on.number("value") == 1)
            #expect(on.string("hex") == "01")
            #expect(on.message.retain == false)
            mark = e2e.messages.count
            try await central.writeValue([0], for: lamp, type: .withoutResponse)
            let off = try await e2e.messages.next(on: "phone/lamp", after: mark)
            #expect(off.number("value") == 0, "\(off.text)")
            // The written value is what the next read returns.
            #expect(try await central.readValue(for: lamp) == [0])
            try await central.disconnect(found.peripheral)
        }
    }

    @Test("an advertisement over the 31-byte legacy limit stops gattway run with exit 78 and the byte count per field")
    func advertisementTooLarge() async throws {
        let scenario = try Scenario.parse(Data(Self.scenario.utf8))
        // The default service_uuids lists both services: flags 3 + 16-bit list 4 + 128-bit list 18 + service data 5 + name 8 = 38.
        let config = Self.config.replacingOccurrences(of: #""service_uuids": ["181A"],"#, with: "")
        try await EndToEnd.run(config: config, scenario: scenario) { e2e in
            let status = try await within(60, "gattway run to exit") { try await e2e.gateway.exited() }
            #expect(status == 78, "\(e2e.gateway.log())")
            let log = e2e.gateway.log()
            #expect(log.contains("advertisement needs 38 bytes, legacy limit is 31"), "\(log)")
            #expect(log.contains("128-bit service UUIDs (1) 18"), "\(log)")
        }
    }

    @Test("solicit_uuids reach bluetoothd as the advertisement's SolicitUUIDs, beside the configured data")
    func solicitedUUIDs() async throws {
        let scenario = try Scenario.parse(Data(Self.scenario.utf8))
        // Flags 3 + 181A 4 + service data 5 + name 8 + solicited 1805 and 180A 6 = 26 of 31 bytes.
        let config = Self.config.replacingOccurrences(
            of: #""service_uuids": ["181A"],"#, with: #""service_uuids": ["181A"], "solicit_uuids": ["1805", "180A"],"#)
        try await EndToEnd.run(config: config, scenario: scenario) { e2e in
            try await e2e.gateway.waitForOutput(containing: "peripheral: advertising")
            // What bluetoothd read (a scanning adapter does not show solicited UUIDs in Device1).
            let registered = await e2e.simulator.registeredAdvertisements(on: "hci1")
            #expect(registered.map(\.solicitUUIDs) == [[BluetoothUUID(0x1805), BluetoothUUID(0x180A)]])
            #expect(registered.map(\.serviceUUIDs) == [[BluetoothUUID(0x181A)]])
            #expect(registered.map(\.localName) == ["gw-e2e"])
            #expect(registered.map(\.secondaryChannel) == [nil], "26 bytes fit legacy advertising")
        }
    }

    @Test(
        "an advertisement over 31 bytes on an adapter with extended advertising: gattway run registers it on the 1M secondary channel, and a scanning central reads it whole"
    )
    func extendedAdvertising() async throws {
        // hci1 offers extended advertising (SupportedSecondaryChannels).
        let scenario = try Scenario.parse(
            Data(
                Self.scenario.replacingOccurrences(
                    of: #"{"name": "hci1", "address": "00:AA:02:00:00:00"}"#,
                    with: #"{"name": "hci1", "address": "00:AA:02:00:00:00", "secondary_channels": ["1M", "2M"]}"#
                ).utf8))
        // The served services' UUIDs, 16- and 128-bit: flags 3 + 4 + 18 + service data 5 + name 8 = 38 bytes.
        let config = Self.config.replacingOccurrences(of: #""service_uuids": ["181A"],"#, with: "")
        try await EndToEnd.run(config: config, scenario: scenario) { e2e in
            try await e2e.gateway.waitForOutput(containing: "peripheral: advertising")
            let registered = await e2e.simulator.registeredAdvertisements(on: "hci1")
            #expect(registered.map(\.secondaryChannel) == ["1M"], "\(e2e.gateway.log())")
            #expect(registered.map(\.serviceUUIDs) == [[BluetoothUUID(0x181A), Self.lampService]])

            let central = try await CentralManager.start(
                options: CentralOptions(adapter: .name("hci0")), bus: .address(e2e.daemon.address), on: e2e.loop)
            defer { Task { await central.close() } }
            try await central.waitUntilPoweredOn(timeout: .seconds(30))
            let scan = try await central.scan(ScanOptions(services: [Self.lampService]))
            let found = try await first(scan, within: 60, "the extended advertisement") {
                $0.peripheral.address == Self.gatewayRadio
            }
            #expect(found.advertisementData.localName == "gw-e2e")
            #expect(Set(found.advertisementData.serviceUUIDs) == [BluetoothUUID(0x181A), Self.lampService])
            #expect(found.advertisementData.serviceData[BluetoothUUID(0x181A)] == [0x00])
            #expect(e2e.gateway.isRunning)
        }
    }

    @Test("after bluetoothd restarts, gattway run serves and advertises again with the latest MQTT value")
    func bluetoothdRestart() async throws {
        let scenario = try Scenario.parse(Data(Self.scenario.utf8))
        try await EndToEnd.run(config: Self.config, scenario: scenario) { e2e in
            try await e2e.observer.publish(
                MQTTMessage(topic: "home/livingroom/state", string: #"{"temperature": 23.4}"#, retain: true))
            try await e2e.gateway.waitForOutput(containing: "peripheral: advertising")
            await e2e.simulator.crash()
            try await e2e.gateway.waitForOutput(containing: "advertising stopped")
            try await e2e.simulator.restart()
            let central = try await CentralManager.start(
                options: CentralOptions(adapter: .name("hci0")), bus: .address(e2e.daemon.address), on: e2e.loop)
            defer { Task { await central.close() } }
            try await central.waitUntilPoweredOn(timeout: .seconds(30))
            let scan = try await central.scan(ScanOptions(services: [BluetoothUUID(0x181A)]))
            let found = try await first(scan, within: 60, "the advertisement after the restart") {
                $0.peripheral.address == Self.gatewayRadio
            }
            try await central.connect(found.peripheral, timeout: .seconds(30), autoReconnect: false)
            let service = try #require(
                try await central.discoverServices([BluetoothUUID(0x181A)], for: found.peripheral).first)
            let temperature = try #require(
                try await central.discoverCharacteristics([BluetoothUUID(0x2A6E)], for: service).first)
            #expect(
                try await central.readValue(for: temperature) == [0x24, 0x09],
                "2340: the value from MQTT, not the configured 20 °C")
            #expect(e2e.gateway.isRunning)
        }
    }
}
