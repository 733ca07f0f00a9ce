import Bluetooth
import Gateway
import JSON
import Parsers
import Testing

/// `presence.espresense`: ESPresense's device ids, topic and payload, and its config.
@Suite("Presence: ESPresense's ids, topics and payloads")
struct ESPresenseTests {
    static let uuid: [UInt8] = [
        0xFD, 0xA5, 0x06, 0x93, 0xA4, 0xE2, 0x4F, 0xB1, 0xAF, 0xCF, 0xC6, 0xEB, 0x07, 0x64, 0x78, 0x25,
    ]
    static let namespace: [UInt8] = [0xED, 0xD1, 0xEB, 0xEA, 0xC0, 0x4E, 0x5D, 0xEF, 0xA0, 0x17]
    static let instance: [UInt8] = [0x0B, 0xDB, 0x87, 0x53, 0x9B, 0x67]

    static let irkID = "irk:ec0234a357c8ad05341010a60a397d9b"
    static let config = #"""
        {"presence": {"room": "kitchen", "away_after": "30s", "rssi_at_1m": -59, "absorption": 3,
                      "espresense": {},
                      "identities": [{"name": "phone", "irk": "ec0234a357c8ad05341010a60a397d9b"},
                                     {"name": "keys", "address": "C4:7C:8D:6A:3E:21"},
                                     {"name": "tag", "ibeacon": "FDA50693-A4E2-4FB1-AFCF-C6EB07647825:100:7"},
                                     {"name": "bike", "eddystone_uid": "EDD1EBEAC04E5DEFA017:0BDB87539B67"}]},
         "devices": [{"match": {"manufacturer_id": 76}}]}
        """#

    @Test("the id of each kind of identity, as an ESPresense node writes it")
    func ids() {
        #expect(ESPresense.id(.irk(SpecSample.irk)) == Self.irkID, "lowercase, most significant byte first")
        #expect(ESPresense.id(.address(BluetoothAddress(rawValue: 0xC47C_8D6A_3E21))) == "known:c47c8d6a3e21")
        #expect(
            ESPresense.id(.iBeacon(uuid: Self.uuid, major: 100, minor: 7))
                == "iBeacon:fda50693-a4e2-4fb1-afcf-c6eb07647825-100-7")
        #expect(
            ESPresense.id(.iBeacon(uuid: [UInt8](repeating: 0, count: 16), major: 65535, minor: 0))
                == "iBeacon:00000000-0000-0000-0000-000000000000-65535-0")
        #expect(
            ESPresense.id(.eddystoneUID(namespace: Self.namespace, instance: Self.instance))
                == "eddy:edd1ebeac0c04e5defa017-0bdb87539b67",
            "the namespace's fifth byte (c0) twice, as the firmware writes it")
        #expect(
            ESPresense.topic(id: "known:c47c8d6a3e21", room: "hall") == "espresense/devices/known:c47c8d6a3e21/hall")
    }

    @Test("config: an object turns it on, enabled false turns it off, room is a topic level")
    func settings() throws {
        #expect(try PresenceConfigTests.parse(#"{"presence": {}}"#).presence?.espresense == nil)
        #expect(
            try PresenceConfigTests.parse(#"{"presence": {"espresense": {}}}"#).presence?.espresense
                == ESPresenseSettings(enabled: true, room: nil))
        #expect(
            try PresenceConfigTests.parse(#"{"presence": {"espresense": {"enabled": true, "room": "living-room"}}}"#)
                .presence?.espresense == ESPresenseSettings(enabled: true, room: "living-room"))
        #expect(
            try PresenceConfigTests.parse(#"{"presence": {"espresense": {"enabled": false, "room": "x"}}}"#)
                .presence?.espresense == nil)
        let lines = PresenceConfigTests.problems(
            #"{"presence": {"espresense": {"enabled": "yes", "room": "a/b", "channel": "x"}}}"#)
        #expect(
            lines == [
                "presence.espresense.enabled: expected true or false, got \"yes\"",
                "presence.espresense.room: expected up to 64 printable characters without '/', '+', '#' or spaces",
                "presence.espresense.channel: is not a known key (expected one of enabled, room)",
            ])
        #expect(
            PresenceConfigTests.problems(#"{"presence": {"espresense": true}}"#) == [
                "presence.espresense: expected an object, got true"
            ])
        #expect(
            PresenceConfigTests.problems(#"{"presence": {"espresense": {"room": "living room"}}}"#).count == 1,
            "a space is refused")
    }

    static func espresense(_ harness: Harness) -> [MQTTOutboundMessage] {
        harness.mqtt.published.filter { $0.topic.hasPrefix("espresense/") }
    }

    @Test("rotations of the phone's RPA: one ESPresense id, the room level, live QoS 0; an unknown IRK: nothing")
    func rotations() async throws {
        let harness = try Harness(Self.config)
        try await harness.start()
        let first = PresenceWiringTests.rpa(0x12345)
        harness.ble.advertise(PresenceWiringTests.report(first, rssi: -74))
        await harness.settle()
        var messages = Self.espresense(harness)
        #expect(messages.map(\.topic) == ["espresense/devices/\(Self.irkID)/kitchen"])
        #expect(messages.first?.retain == false && messages.first?.qos == 0)
        let payload = try #require(messages.first.flatMap { json($0.payloadText) })
        #expect(payload["id"] == .string(Self.irkID) && payload["name"] == .string("phone"))
        #expect(payload["distance"] == .number(3.16) && payload["rssi"] == .number(-74))
        #expect(payload["rssi@1m"] == .number(-59))
        #expect(payload["mac"] == .string(Hex.encode(first.rawValue, digits: 12)))

        let stranger = RandomAddressHash.address(
            AESBlockCipher(key: [UInt8](repeating: 7, count: 16))!, random: 99)!
        for rotation in 1...3 {
            await harness.advance(3)
            harness.ble.advertise(
                PresenceWiringTests.report(PresenceWiringTests.rpa(0x12345 + UInt32(rotation)), rssi: -74))
            harness.ble.advertise(PresenceWiringTests.report(stranger, rssi: -50))
            await harness.settle()
        }
        messages = Self.espresense(harness)
        #expect(Set(messages.map(\.topic)) == ["espresense/devices/\(Self.irkID)/kitchen"], "nothing for the stranger")
        #expect(messages.count == 4, "one per presence message: at most one every 2 s")
        let last = try #require(messages.last.flatMap { json($0.payloadText) })
        #expect(last["mac"] == .string(Hex.encode(PresenceWiringTests.rpa(0x12348).rawValue, digits: 12)))

        // Gone: `<base>/presence/phone` says not_home; ESPresense just stops, as a node does.
        await harness.advance(31)
        #expect(harness.mqtt.messages(on: "gattway/presence/phone").last?.payloadText.contains("not_home") == true)
        #expect(Self.espresense(harness).count == 4)
    }

    @Test("fixed address, iBeacon and Eddystone UID: their ids; presence.espresense.room wins over the presence room")
    func beacons() async throws {
        let harness = try Harness(
            Self.config.replacingOccurrences(of: #""espresense": {}"#, with: #""espresense": {"room": "lab"}"#))
        try await harness.start()
        let somewhere = BluetoothAddress(rawValue: 0x1122_3344_5566)
        harness.ble.advertise(
            BLEDiscovery(
                address: BluetoothAddress(rawValue: 0xC47C_8D6A_3E21), advertisement: AdvertisementData(rssi: -59),
                addressType: .public))
        harness.ble.advertise(
            BLEDiscovery(
                address: somewhere,
                advertisement: AdvertisementData(
                    manufacturerData: [0x004C: [0x02, 0x15] + Self.uuid + [0x00, 0x64, 0x00, 0x07, 0xBF]], rssi: -65),
                addressType: .random))
        harness.ble.advertise(
            BLEDiscovery(
                address: BluetoothAddress(rawValue: 0x2233_4455_6677),
                advertisement: AdvertisementData(
                    serviceData: [BluetoothUUID(0xFEAA): [0x00, 0xEC] + Self.namespace + Self.instance + [0, 0]],
                    rssi: -61),
                addressType: .random))
        await harness.settle()
        let byTopic = Dictionary(
            Self.espresense(harness).map { ($0.topic, json($0.payloadText)) }, uniquingKeysWith: { $1 })
        #expect(
            Set(byTopic.keys) == [
                "espresense/devices/known:c47c8d6a3e21/lab",
                "espresense/devices/iBeacon:fda50693-a4e2-4fb1-afcf-c6eb07647825-100-7/lab",
                "espresense/devices/eddy:edd1ebeac0c04e5defa017-0bdb87539b67/lab",
            ])
        let keys = byTopic["espresense/devices/known:c47c8d6a3e21/lab"] ?? nil
        #expect(keys?["id"] == .string("known:c47c8d6a3e21") && keys?["distance"] == .number(1))
        let tag = byTopic["espresense/devices/iBeacon:fda50693-a4e2-4fb1-afcf-c6eb07647825-100-7/lab"] ?? nil
        #expect(tag?["rssi@1m"] == .number(-65) && tag?["distance"] == .number(1), "the beacon's measured power")
        let bike = byTopic["espresense/devices/eddy:edd1ebeac0c04e5defa017-0bdb87539b67/lab"] ?? nil
        #expect(bike?["rssi@1m"] == .number(-61) && bike?["name"] == .string("bike"), "−20 dBm at 0 m is −61 at 1 m")
        #expect(
            harness.mqtt.messages(on: "gattway/presence/keys").last?.payloadText.contains(#""room":"kitchen""#) == true,
            "the presence topic keeps presence.room")
    }

    @Test("without presence.espresense nothing goes to espresense/")
    func off() async throws {
        let harness = try Harness(Self.config.replacingOccurrences(of: #""espresense": {},"#, with: ""))
        try await harness.start()
        harness.ble.advertise(PresenceWiringTests.report(PresenceWiringTests.rpa(1), rssi: -70))
        await harness.settle()
        #expect(!harness.mqtt.messages(on: "gattway/presence/phone").isEmpty)
        #expect(Self.espresense(harness).isEmpty)
    }
}
