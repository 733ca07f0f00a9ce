import Bluetooth
import Gateway
import JSON
import Testing

/// A sensor sends each frame in several advertising events; each frame is published once, while
/// RSSI, last seen and availability follow every report (docs/config.md, `publish_repeats`).
@Suite("Repeated advertising frames: one state message per frame")
struct RepeatedFrameTests {
    static let sensor = address("A4:C1:38:00:00:01")
    static let topic = "gattway/A4C138000001"
    static let config = #"{"devices": [{"match": {"services": ["FCD2"]}}]}"#

    /// A BTHome v2 frame with packet id `packet` (object 0x00), temperature 25.06 °C and the
    /// humidity given in hundredths of a percent.
    static func frame(packet: UInt8, humidity: UInt16 = 5055, rssi: Int16 = -60) -> BLEDiscovery {
        bthome(
            sensor, rssi: rssi,
            payload: [0x40, 0x00, packet, 0x02, 0xCA, 0x09, 0x03, UInt8(humidity & 0xFF), UInt8(humidity >> 8)])
    }

    /// A Govee H5075 advertisement (no counter in the format): manufacturer data 0xEC88.
    static func govee(_ payload: [UInt8], rssi: Int16 = -60) -> BLEDiscovery {
        BLEDiscovery(
            address: address("A4:C1:38:DD:DB:F8"),
            advertisement: AdvertisementData(localName: "GVH5075_DBF8", manufacturerData: [0xEC88: payload], rssi: rssi)
        )
    }

    func states(_ harness: Harness, _ topic: String = RepeatedFrameTests.topic) -> [JSONValue] {
        harness.mqtt.payloads(on: topic).compactMap(json)
    }

    func started(_ config: String = RepeatedFrameTests.config) async throws -> Harness {
        let harness = try Harness(config)
        try await harness.start()
        return harness
    }

    @Test(
        "a BTHome frame sent in 4 advertising events is published once; each new packet id is published, even with the same values"
    )
    func packetID() async throws {
        let harness = try await started()
        for packet: UInt8 in [7, 8] {
            for _ in 0..<4 { await harness.gateway.handle(Self.frame(packet: packet)) }
        }
        let states = states(harness)
        #expect(states.map { $0["packet_id"] } == [.number(7), .number(8)])
        #expect(states.allSatisfy { $0["temperature"] == .number(25.06) })
        #expect(await harness.gateway.counters.dropped.repeatedFrame == 6)
        #expect(await harness.gateway.counters.advertisements == 8)
    }

    @Test(
        "a counter that wraps, restarts (a reboot) or goes back is a new frame: only equality with the last is a repeat"
    )
    func wrapAndReset() async throws {
        let harness = try await started()
        for packet: UInt8 in [254, 255, 255, 0, 0, 1, 0, 0, 200] {
            await harness.gateway.handle(Self.frame(packet: packet))
        }
        #expect(states(harness).map { $0["packet_id"] } == [254, 255, 0, 1, 0, 200].map { .number($0) })
        #expect(await harness.gateway.counters.dropped.repeatedFrame == 3)
    }

    @Test("a repeat is not published but still moves RSSI and last_seen (the heartbeat's state shows them)")
    func rssiAndLastSeen() async throws {
        let harness = try await started(
            #"{"devices": [{"match": {"services": ["FCD2"]}, "heartbeat": "60s"}]}"#)
        await harness.gateway.handle(Self.frame(packet: 1, rssi: -80))
        await harness.advance(5)
        await harness.gateway.handle(Self.frame(packet: 1, rssi: -50))
        #expect(states(harness).count == 1)
        #expect(states(harness).first?["rssi"] == .number(-80))
        await harness.advance(55)
        let states = states(harness)
        #expect(states.count == 2, "the heartbeat")
        #expect(states.last?["rssi"] == .number(-50))
        #expect(states.last?["last_seen"] == .string("2026-11-30T17:00:05.000Z"))
    }

    @Test("repeats keep an advertisement-only device online: availability follows every report")
    func availability() async throws {
        let harness = try await started(
            #"{"devices": [{"match": {"services": ["FCD2"]}, "availability_timeout": "10s"}]}"#)
        let topic = Self.topic + "/availability"
        for _ in 0..<6 {
            await harness.gateway.handle(Self.frame(packet: 3))
            await harness.advance(6)
        }
        #expect(harness.mqtt.payloads(on: topic) == [#"{"state":"online"}"#], "30 s of repeats, 6 s apart")
        #expect(states(harness).count == 1)
        await harness.advance(5)
        #expect(harness.mqtt.payloads(on: topic) == [#"{"state":"online"}"#, #"{"state":"offline"}"#])
    }

    @Test(
        "two adapters: the second adapter's copy is a repeat also after the first adapter's next frame; one adapter going back is new"
    )
    func twoAdapters() async throws {
        let harness = try await started()
        func heard(_ packet: UInt8, on adapter: UInt8) async {
            var discovery = Self.frame(packet: packet)
            discovery.adapter = adapter
            await harness.gateway.handle(discovery)
        }
        // hci0 ahead of hci1 by one and then two frames, as two sockets read in one loop turn.
        for (packet, adapter): (UInt8, UInt8) in [(5, 0), (6, 0), (5, 1), (6, 1), (7, 0), (8, 0), (7, 1), (8, 1)] {
            await heard(packet, on: adapter)
        }
        #expect(states(harness).map { $0["packet_id"] } == [5, 6, 7, 8].map { .number($0) })
        #expect(await harness.gateway.counters.dropped.repeatedFrame == 4)
        // One adapter's counter going back (a reboot) is a new frame, as with one adapter.
        for packet: UInt8 in [0, 1, 0] { await heard(packet, on: 1) }
        #expect(states(harness).map { $0["packet_id"] } == [5, 6, 7, 8, 0, 1, 0].map { .number($0) })
    }

    @Test("a format without a counter: identical bytes are a repeat, changed bytes a new frame")
    func withoutCounter() async throws {
        let harness = try await started(#"{"devices": [{"match": {"address_prefix": "A4:C1:38"}}]}"#)
        let first: [UInt8] = [0x00, 0x03, 0x4D, 0xB2, 0x64, 0x00]
        var changed = first
        changed[3] = 0xB3
        for payload in [first, first, first, changed, changed, first] {
            await harness.gateway.handle(Self.govee(payload))
        }
        let states = states(harness, "gattway/A4C138DDDBF8")
        #expect(states.map { $0["humidity"] } == [.number(49.8), .number(49.9), .number(49.8)])
        #expect(await harness.gateway.counters.dropped.repeatedFrame == 3)
    }

    @Test("an encrypted BTHome frame repeated is published once (known by its counter once decrypted)")
    func encrypted() async throws {
        let harness = try await started(
            #"{"devices": [{"match": {"services": ["FCD2"]}, "bindkey": "\#(BindKeyTests.key)"}]}"#)
        for _ in 0..<3 { await harness.gateway.handle(bthome(BindKeyTests.sensor, payload: BindKeyTests.frame)) }
        #expect(states(harness, "gattway/" + BindKeyTests.name).count == 1)
        #expect(await harness.gateway.counters.dropped.repeatedFrame == 2)
    }

    @Test("publish_repeats: true publishes every report, as before")
    func publishRepeats() async throws {
        let harness = try await started(#"{"devices": [{"match": {"services": ["FCD2"]}, "publish_repeats": true}]}"#)
        for _ in 0..<4 { await harness.gateway.handle(Self.frame(packet: 7)) }
        #expect(states(harness).count == 4)
        #expect(await harness.gateway.counters.dropped.repeatedFrame == 0)
    }

    @Test("bridge/health counts the repeats in dropped.repeated_frame; decoded counts every frame")
    func health() async throws {
        let harness = try await started()
        for _ in 0..<4 { await harness.gateway.handle(Self.frame(packet: 9)) }
        let payload = await harness.gateway.healthPayload
        #expect(payload["dropped"]?["repeated_frame"] == .number(3))
        #expect(payload["decoded"] == .number(4))
    }

    @Test("a device's frame is remembered per device: the same frame from two sensors is published for each")
    func perDevice() async throws {
        let harness = try await started()
        let other = address("A4:C1:38:00:00:02")
        let payload: [UInt8] = [0x40, 0x00, 0x05, 0x02, 0xCA, 0x09]
        for device in [Self.sensor, other, Self.sensor, other] {
            await harness.gateway.handle(bthome(device, payload: payload))
        }
        #expect(states(harness).count == 1)
        #expect(states(harness, "gattway/A4C138000002").count == 1)
        #expect(await harness.gateway.counters.dropped.repeatedFrame == 2)
    }
}
