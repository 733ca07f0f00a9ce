import Bluetooth
import Gateway
import GatewayFakes
import JSON
import Testing

@Suite("Pipeline: advertisements and connected devices to MQTT state")
struct PipelineTests {
    static let sensor = address("A4:C1:38:00:00:01")
    static let battery = address("A4:C1:38:00:00:02")
    static let heartRate = address("A4:C1:38:00:00:03")

    static let advertConfig = """
        {"bluetooth": {"scan": {"services": []}},
         "devices": [{"match": {"services": ["FCD2"]}}]}
        """

    @Test("a BTHome advertisement becomes gattway/<ADDRESS> JSON state with rssi, linkquality and last_seen")
    func advertisementState() async throws {
        let harness = try Harness(Self.advertConfig)
        try await harness.start()
        await harness.gateway.handle(bthome(Self.sensor, rssi: -60))
        let messages = harness.mqtt.messages(on: "gattway/A4C138000001")
        #expect(messages.count == 1)
        #expect(
            messages.first?.payloadText
                == #"{"temperature":25.06,"humidity":50.55,"rssi":-60,"linkquality":146,"last_seen":"2026-11-30T17:00:00.000Z"}"#
        )
        #expect(messages.first?.retain == false)
        #expect(messages.first?.qos == 1)
    }

    @Test("a 180F-filtered config never reports a heart-rate-only device, even when the port passes it")
    func serviceFilter() async throws {
        let harness = try Harness(
            """
            {"bluetooth": {"scan": {"services": ["180F"]}}, "devices": [{"match": {}}]}
            """)
        try await harness.start()
        #expect(harness.ble.scanFilters == [[BluetoothUUID(0x180F)]])
        await harness.gateway.handle(
            BLEDiscovery(
                address: Self.heartRate,
                advertisement: AdvertisementData(localName: "HRM", serviceUUIDs: [BluetoothUUID(0x180D)], rssi: -50)))
        await harness.gateway.handle(
            BLEDiscovery(
                address: Self.battery,
                advertisement: AdvertisementData(serviceUUIDs: [BluetoothUUID(0x180F)], rssi: -50)))
        await harness.advance(1)  // bridge/devices goes out at most once a second
        let devices = harness.mqtt.payloads(on: "gattway/bridge/devices").last ?? ""
        #expect(!devices.contains("A4:C1:38:00:00:03"))
        #expect(devices.contains("A4:C1:38:00:00:02"))
        #expect(!harness.mqtt.published.contains { $0.topic.contains("A4C138000003") })
    }

    @Test("a bad payload is counted and logged; the next good one is still published")
    func badPayload() async throws {
        let harness = try Harness(#"{"devices": [{"match": {"address": "A4:C1:38:00:00:01"}}]}"#)
        try await harness.start()
        // A Ruuvi RAWv2 frame cut short.
        await harness.gateway.handle(
            BLEDiscovery(
                address: Self.sensor,
                advertisement: AdvertisementData(manufacturerData: [0x0499: [0x05, 0x12]], rssi: -60)))
        #expect(await harness.gateway.counters.parseErrors == 1)
        #expect(harness.mqtt.messages(on: "gattway/A4C138000001").isEmpty)
        await harness.gateway.handle(bthome(Self.sensor))
        #expect(harness.mqtt.messages(on: "gattway/A4C138000001").count == 1)
    }

    @Test(
        "a device rule with connect: scan 180F → connect → subscribe 2A19 → battery published under the friendly name")
    func connectedDevice() async throws {
        let harness = try Harness(
            """
            {"bluetooth": {"scan": {"services": ["180F"]}},
             "devices": [{"match": {"address": "A4:C1:38:00:00:02"}, "name": "remote", "connect": true,
                          "subscribe": [{"characteristic": "2A19"}]}]}
            """)
        harness.ble.add(
            Self.battery,
            .init(characteristics: [
                BLECharacteristic(
                    service: BluetoothUUID(0x180F), uuid: BluetoothUUID(0x2A19), properties: [.read, .notify])
            ]))
        try await harness.start()
        await harness.gateway.handle(
            BLEDiscovery(
                address: Self.battery,
                advertisement: AdvertisementData(serviceUUIDs: [BluetoothUUID(0x180F)], rssi: -70)))
        await harness.gateway.waitUntilIdle()
        #expect(harness.ble.log.contains("notify A4:C1:38:00:00:02 2A19"))
        #expect(harness.mqtt.payloads(on: "gattway/remote/availability").last == #"{"state":"online"}"#)
        harness.ble.notify(Self.battery, BluetoothUUID(0x2A19), [97])
        let state = await harness.mqtt.waitFor("gattway/remote")
        #expect(state.last?.payloadText.hasPrefix(#"{"battery":97,"rssi":-70,"linkquality":109,"last_seen":"#) == true)
        // A value the parser rejects (battery level > 100) is counted; the next is published.
        harness.ble.notify(Self.battery, BluetoothUUID(0x2A19), [101])
        harness.ble.notify(Self.battery, BluetoothUUID(0x2A19), [96])
        let next = await harness.mqtt.waitFor("gattway/remote", count: 2)
        #expect(next.last?.payloadText.hasPrefix(#"{"battery":96"#) == true)
        #expect(await harness.gateway.counters.parseErrors == 1)
    }

    @Test("a subscribed characteristic that can only be read (no notify/indicate) is read once per connection instead")
    func readOnlySubscription() async throws {
        let harness = try Harness(
            """
            {"bluetooth": {"scan": {"services": ["180F"]}},
             "devices": [{"match": {"services": ["180F"]}, "connect": true, "subscribe": [{"characteristic": "2A19"}]}]}
            """)
        var peripheral = InMemoryBLE.Peripheral(characteristics: [
            BLECharacteristic(service: BluetoothUUID(0x180F), uuid: BluetoothUUID(0x2A19), properties: [.read])
        ])
        peripheral.values[BluetoothUUID(0x2A19)] = [87]
        harness.ble.add(Self.battery, peripheral)
        try await harness.start()
        let advert = BLEDiscovery(
            address: Self.battery, advertisement: AdvertisementData(serviceUUIDs: [BluetoothUUID(0x180F)], rssi: -70))
        await harness.gateway.handle(advert)
        await harness.gateway.waitUntilIdle()
        #expect(
            !harness.ble.log.contains("notify A4:C1:38:00:00:02 2A19"),
            "no subscription attempt on a read-only characteristic")
        #expect(harness.ble.log.filter { $0 == "read A4:C1:38:00:00:02 2A19" }.count == 1)
        #expect(harness.mqtt.payloads(on: "gattway/A4C138000002").last?.hasPrefix(#"{"battery":87,"#) == true)
        // Read again after the link drops and comes back.
        harness.ble.update(Self.battery) { $0.values[BluetoothUUID(0x2A19)] = [86] }
        harness.ble.dropLink(Self.battery)
        await harness.mqtt.waitFor("gattway/A4C138000002/availability", count: 3)
        await harness.advance(5)
        await harness.gateway.waitUntilIdle()
        #expect(harness.ble.log.filter { $0 == "read A4:C1:38:00:00:02 2A19" }.count == 2)
        #expect(harness.mqtt.payloads(on: "gattway/A4C138000002").last?.hasPrefix(#"{"battery":86,"#) == true)
    }

    @Test("per-attribute topics carry plain values when configured")
    func attributeTopics() async throws {
        let harness = try Harness(
            """
            {"mqtt": {"attribute_topics": true, "retain": true}, "devices": [{"match": {"services": ["FCD2"]}, "qos": 0}]}
            """)
        try await harness.start()
        await harness.gateway.handle(bthome(Self.sensor))
        #expect(harness.mqtt.payloads(on: "gattway/A4C138000001/temperature") == ["25.06"])
        #expect(harness.mqtt.payloads(on: "gattway/A4C138000001/humidity") == ["50.55"])
        #expect(harness.mqtt.messages(on: "gattway/A4C138000001").first?.retain == true)
        #expect(harness.mqtt.messages(on: "gattway/A4C138000001").first?.qos == 0)
    }

    @Test("polled characteristics are read on connect and every interval on the clock")
    func polling() async throws {
        let harness = try Harness(
            """
            {"devices": [{"match": {"address": "A4:C1:38:00:00:02"}, "name": "remote", "connect": true,
                          "poll": [{"characteristic": "2A19", "interval": "5m"}]}]}
            """)
        harness.ble.add(
            Self.battery,
            .init(
                characteristics: [
                    BLECharacteristic(service: BluetoothUUID(0x180F), uuid: BluetoothUUID(0x2A19), properties: [.read])
                ], values: [BluetoothUUID(0x2A19): [80]]))
        try await harness.start()
        await harness.gateway.handle(BLEDiscovery(address: Self.battery, advertisement: AdvertisementData(rssi: -50)))
        await harness.gateway.waitUntilIdle()
        await harness.advance(0)
        await harness.gateway.waitUntilIdle()
        #expect(harness.mqtt.payloads(on: "gattway/remote").count == 1)
        await harness.advance(299)
        await harness.gateway.waitUntilIdle()
        #expect(harness.ble.log.filter { $0.hasPrefix("read") }.count == 1)
        harness.ble.update(Self.battery) { $0.values[BluetoothUUID(0x2A19)] = [79] }
        await harness.advance(1)
        await harness.gateway.waitUntilIdle()
        #expect(harness.ble.log.filter { $0.hasPrefix("read") }.count == 2)
        #expect(harness.mqtt.payloads(on: "gattway/remote").last?.hasPrefix(#"{"battery":79"#) == true)
    }
}
