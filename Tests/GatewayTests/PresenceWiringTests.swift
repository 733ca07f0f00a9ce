import Bluetooth
import Gateway
import JSON
import Parsers
import Testing

/// Presence wired into the advertisement path: a phone's rotating resolvable private address is
/// one identity published under `<base>/presence/<name>`, never a device.
@Suite("Presence: reports matched to identities, published, and not_home after away_after")
struct PresenceWiringTests {
    static let topic = "gattway/presence/phone"
    /// A catch-all rule for the Apple manufacturer data the phone sends: without presence, every
    /// rotation would be a new device.
    static let config = #"""
        {"health": {"enabled": true, "interval": "1h"},
         "presence": {"room": "kitchen", "away_after": "30s", "rssi_at_1m": -59, "absorption": 3,
                      "identities": [{"name": "phone", "irk": "ec0234a357c8ad05341010a60a397d9b"},
                                     {"name": "keys", "address": "C4:7C:8D:6A:3E:21"}]},
         "devices": [{"match": {"manufacturer_id": 76}}]}
        """#

    static func report(_ address: BluetoothAddress, rssi: Int16, type: BluetoothAddress.AddressType? = .random)
        -> BLEDiscovery
    {
        var data = AdvertisementData(rssi: rssi)
        data.manufacturerData[0x004C] = [0x10, 0x05, 0x01, 0x18, 0x44, 0x33, 0x22]
        return BLEDiscovery(address: address, advertisement: data, addressType: type)
    }

    static func rpa(_ random: UInt32) -> BluetoothAddress {
        RandomAddressHash.address(AESBlockCipher(key: SpecSample.irk)!, random: random)!
    }

    func payloads(_ harness: Harness) -> [JSONValue] {
        harness.mqtt.messages(on: Self.topic).compactMap { json($0.payloadText) }
    }

    @Test("rotations of the phone's RPA: one presence topic, retained, no device; an unknown IRK: nothing")
    func rotations() async throws {
        let harness = try Harness(Self.config)
        try await harness.start()
        harness.ble.advertise(Self.report(Self.rpa(0x12345), rssi: -74))
        await harness.settle()
        var messages = harness.mqtt.messages(on: Self.topic)
        #expect(messages.count == 1 && messages.last?.retain == true)
        let first = try #require(payloads(harness).last)
        #expect(first["state"] == .string("home") && first["room"] == .string("kitchen"))
        #expect(first["rssi"] == .number(-74))
        #expect(first["distance"] == .number(3.16), "−74 dBm at −59 dBm/1 m, exponent 3: 10^0.5 m")
        #expect(first["last_seen"] != nil)

        // A new address every few seconds, and a phone of another IRK at the same time.
        let stranger = RandomAddressHash.address(
            AESBlockCipher(key: [UInt8](repeating: 7, count: 16))!, random: 99)!
        for rotation in 1...3 {
            await harness.advance(3)
            harness.ble.advertise(Self.report(Self.rpa(0x12345 + UInt32(rotation)), rssi: -74))
            harness.ble.advertise(Self.report(stranger, rssi: -50))
            await harness.settle()
        }
        messages = harness.mqtt.messages(on: Self.topic)
        #expect(messages.count == 4, "one message per report 3 s apart (publish interval 2 s)")
        let others = harness.mqtt.published.filter {
            $0.topic.hasPrefix("gattway/presence/") && $0.topic != Self.topic
        }
        #expect(others.isEmpty, "nothing for the unknown IRK")
        let devices = await harness.gateway.devicesPayload
        guard case .array(let list) = devices else { Issue.record("devices: \(devices)"); return }
        #expect(list.count == 1, "only the stranger is a device (the catch-all rule); the phone's RPAs none")
        #expect(await harness.gateway.presenceTrack("phone")?.home == true)

        let health = await harness.gateway.healthPayload["presence"]
        #expect(health?["identities"] == .number(2) && health?["home"] == .number(1))
        #expect(health?["resolved"] == .number(4), "four addresses of the phone resolved")
        #expect(health?["unresolved"] == .number(1), "the stranger's address tried once")
        #expect(health?["cache_hits"] == .number(2), "the stranger's later reports: the cache")

        // Reports of the same address within the publish interval: smoothed, not each published.
        harness.ble.advertise(Self.report(Self.rpa(0x12348), rssi: -60))
        await harness.settle()
        #expect(harness.mqtt.messages(on: Self.topic).count == 4)
    }

    @Test("not_home after away_after by the timer alone; home again on the next report")
    func away() async throws {
        let harness = try Harness(Self.config)
        try await harness.start()
        harness.ble.advertise(Self.report(Self.rpa(1), rssi: -65))
        await harness.settle()
        await harness.advance(29)
        #expect(payloads(harness).last?["state"] == .string("home"))
        await harness.advance(1.5)
        let gone = try #require(payloads(harness).last)
        #expect(gone["state"] == .string("not_home") && gone["room"] == .string("kitchen"))
        #expect(gone["distance"] == .null && gone["rssi"] == .null)
        #expect(harness.mqtt.messages(on: Self.topic).last?.retain == true)
        let count = payloads(harness).count
        await harness.advance(60)
        #expect(payloads(harness).count == count, "not_home once")
        harness.ble.advertise(Self.report(Self.rpa(2), rssi: -65))
        await harness.settle()
        #expect(payloads(harness).last?["state"] == .string("home"))
    }

    @Test("an address identity is matched by its fixed address whatever its type; the public twin of an RPA is not")
    func fixedAndPublic() async throws {
        let harness = try Harness(Self.config)
        try await harness.start()
        harness.ble.advertise(Self.report(address("C4:7C:8D:6A:3E:21"), rssi: -59, type: nil))
        harness.ble.advertise(Self.report(Self.rpa(3), rssi: -59, type: .public))
        harness.ble.advertise(Self.report(Self.rpa(4), rssi: -59, type: nil))
        await harness.settle()
        let keys = harness.mqtt.messages(on: "gattway/presence/keys").compactMap { json($0.payloadText) }
        #expect(keys.last?["state"] == .string("home") && keys.last?["distance"] == .number(1))
        #expect(payloads(harness).isEmpty, "a public or untyped address is never resolved")
    }

    @Test("without a presence section nothing is matched and bridge/health has no presence")
    func without() async throws {
        let harness = try Harness(#"{"health": {"enabled": true}, "devices": [{"match": {"manufacturer_id": 76}}]}"#)
        try await harness.start()
        harness.ble.advertise(Self.report(Self.rpa(1), rssi: -65))
        await harness.settle()
        #expect(harness.mqtt.published.filter { $0.topic.hasPrefix("gattway/presence/") }.isEmpty)
        #expect(await harness.gateway.healthPayload["presence"] == nil)
        guard case .array(let list) = await harness.gateway.devicesPayload else { return }
        #expect(list.count == 1, "the RPA is an ordinary device")
    }
}

@Suite("Presence: Home Assistant discovery")
struct PresenceDiscoveryTests {
    @Test(
        "one HA device per identity: a bluetooth_le device_tracker and distance, room and RSSI sensors; rotations add none"
    )
    func discovery() async throws {
        let harness = try Harness(
            PresenceWiringTests.config.replacingOccurrences(
                of: #""health""#, with: #""homeassistant": {"enabled": true}, "health""#))
        try await harness.start()
        for rotation in 0..<3 {
            harness.ble.advertise(PresenceWiringTests.report(PresenceWiringTests.rpa(UInt32(rotation)), rssi: -70))
            await harness.advance(3)
        }
        let configs = harness.mqtt.published.filter {
            $0.topic.hasPrefix("homeassistant/") && $0.topic.contains("_presence_")
        }
        #expect(
            Set(configs.map(\.topic)) == [
                "homeassistant/device_tracker/gattway_presence_phone/tracker/config",
                "homeassistant/sensor/gattway_presence_phone/distance/config",
                "homeassistant/sensor/gattway_presence_phone/room/config",
                "homeassistant/sensor/gattway_presence_phone/rssi/config",
            ])
        #expect(configs.count == 4 && configs.allSatisfy(\.retain), "published once, retained")
        let tracker = try #require(
            configs.first { $0.topic.contains("device_tracker") }.flatMap { json($0.payloadText) })
        #expect(tracker["source_type"] == .string("bluetooth_le"))
        #expect(tracker["state_topic"] == .string("gattway/presence/phone"))
        #expect(tracker["payload_not_home"] == .string("not_home"))
        #expect(tracker["device"]?["identifiers"] == .array([.string("gattway_presence_phone")]))
        let first = try #require(harness.mqtt.published.firstIndex { $0.topic == PresenceWiringTests.topic })
        let lastConfig = try #require(harness.mqtt.published.lastIndex { $0.topic.contains("_presence_") })
        #expect(lastConfig < first, "the configs before the first state")
        let deviceConfigs = harness.mqtt.published.filter {
            $0.topic.hasPrefix("homeassistant/") && !$0.topic.contains("_presence_") && !$0.topic.contains("_bridge")
        }
        #expect(deviceConfigs.isEmpty, "no device for the phone's addresses: \(deviceConfigs.map(\.topic))")

        // Home Assistant restarted: the configs again.
        await harness.gateway.handle(
            MQTTInboundMessage(topic: "homeassistant/status", payload: Array("online".utf8)))
        await harness.advance(30)
        let again = harness.mqtt.published.filter { $0.topic.contains("_presence_phone/tracker") }
        #expect(again.count == 2)
    }
}
