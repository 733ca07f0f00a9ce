import Bluetooth
import Gateway
import JSON
import Retry
import Testing

@Suite("Availability and bridge topics")
struct AvailabilityTests {
    static let sensor = address("A4:C1:38:00:00:01")
    static let remote = address("A4:C1:38:00:00:02")
    static let online = #"{"state":"online"}"#
    static let offline = #"{"state":"offline"}"#

    @Test(
        "advertisement-only: offline after the fallback timeout on the clock, online again with the next advertisement")
    func fallbackTimeout() async throws {
        let harness = try Harness(
            #"{"availability": {"fallback_timeout": "10m"}, "devices": [{"match": {"services": ["FCD2"]}}]}"#)
        try await harness.start()
        await harness.gateway.handle(bthome(Self.sensor))
        let topic = "gattway/A4C138000001/availability"
        #expect(harness.mqtt.payloads(on: topic) == [Self.online])
        #expect(harness.mqtt.messages(on: topic).first?.retain == true)
        await harness.advance(599)
        #expect(harness.mqtt.payloads(on: topic) == [Self.online])
        await harness.advance(1)
        #expect(harness.mqtt.payloads(on: topic) == [Self.online, Self.offline])
        await harness.advance(600)
        #expect(harness.mqtt.payloads(on: topic).count == 2)
        await harness.gateway.handle(bthome(Self.sensor))
        #expect(harness.mqtt.payloads(on: topic) == [Self.online, Self.offline, Self.online])
    }

    @Test("advertisement-only: a learned interval (2s × 10 missed, at least 5s) replaces the fallback")
    func learnedInterval() async throws {
        let harness = try Harness(
            """
            {"availability": {"minimum_timeout": "5s", "missed_intervals": 10}, "devices": [{"match": {"services": ["FCD2"]}}]}
            """)
        try await harness.start()
        for _ in 0..<4 {
            await harness.gateway.handle(bthome(Self.sensor))
            await harness.advance(2)
        }
        let topic = "gattway/A4C138000001/availability"
        // Last advertisement at t=6; learned interval 2 s → offline at t=26 (now t=8).
        await harness.advance(17.9)
        #expect(harness.mqtt.payloads(on: topic) == [Self.online])
        await harness.advance(0.1)
        #expect(harness.mqtt.payloads(on: topic) == [Self.online, Self.offline])
    }

    @Test("connected devices follow the link; a dropped link reconnects after the strategy's delay")
    func linkAvailability() async throws {
        let harness = try Harness(
            """
            {"devices": [{"match": {"address": "A4:C1:38:00:00:02"}, "name": "remote", "connect": true,
                          "subscribe": [{"characteristic": "2A19"}]}]}
            """, retryDelay: 5)
        harness.ble.add(
            Self.remote,
            .init(characteristics: [
                BLECharacteristic(service: BluetoothUUID(0x180F), uuid: BluetoothUUID(0x2A19), properties: [.notify])
            ]))
        try await harness.start()
        await harness.gateway.handle(BLEDiscovery(address: Self.remote, advertisement: AdvertisementData(rssi: -40)))
        await harness.gateway.waitUntilIdle()
        let topic = "gattway/remote/availability"
        #expect(harness.mqtt.payloads(on: topic) == [Self.offline, Self.online])
        harness.ble.dropLink(Self.remote)
        await harness.mqtt.waitFor(topic, count: 3)
        #expect(harness.mqtt.payloads(on: topic) == [Self.offline, Self.online, Self.offline])
        #expect(
            harness.mqtt.payloads(on: "gattway/bridge/event").contains { $0.contains(#""type":"device_disconnected""#) }
        )
        await harness.advance(4.9)
        #expect(harness.ble.connectAttempts.count == 1)
        await harness.advance(0.1)
        await harness.gateway.waitUntilIdle()
        #expect(harness.ble.connectAttempts.count == 2)
        #expect(harness.mqtt.payloads(on: topic).last == Self.online)
    }

    /// A started gateway with `bluetooth` settings and one `connect` rule for ``remote``, which
    /// refuses every connection with `error` (retries every 5 s).
    static func refusingDevice(_ bluetooth: String, error: String = "le-connection-abort", extra: String = "")
        async throws -> Harness
    {
        let harness = try Harness(
            #"{"bluetooth": \#(bluetooth), \#(extra)"devices": [{"match": {"address": "A4:C1:38:00:00:02"}, "name": "beacon", "connect": true}]}"#,
            retryDelay: 5)
        harness.ble.add(Self.remote, .init(characteristics: [], connectError: BLEPortError(.connectionTimeout, error)))
        try await harness.start()
        await Self.heard(harness)
        return harness
    }

    /// The device advertises once.
    static func heard(_ harness: Harness) async {
        await harness.gateway.handle(BLEDiscovery(address: Self.remote, advertisement: AdvertisementData(rssi: -40)))
    }

    @Test(
        "a connect rule on a device that never accepts a connection: device_connect_failed each time, parked after park_after attempts (device_parked, health parked 1), then tried only every parked_retry; a link un-parks it"
    )
    func parked() async throws {
        let harness = try await Self.refusingDevice(
            #"{"park_after": 3, "parked_retry": "10m"}"#, error: "le-connection-abort-by-local",
            extra: #""health": {"interval": "60s"}, "#)
        await harness.gateway.waitUntilIdle()
        #expect(harness.ble.connectAttempts.count == 1)
        // It keeps advertising while it refuses: heard before each retry.
        for _ in 0..<2 {
            await Self.heard(harness)
            await harness.advance(5)
        }
        await harness.gateway.waitUntilIdle()
        #expect(harness.ble.connectAttempts.count == 3)
        let events = harness.mqtt.payloads(on: "gattway/bridge/event")
        #expect(events.count { $0.contains(#""type":"device_connect_failed""#) } == 3, "\(events)")
        #expect(events.count { $0.contains(#""type":"device_parked""#) } == 1, "\(events)")
        #expect(events.last?.contains("le-connection-abort-by-local") == true, "\(events)")
        // Heard again and again: no attempt while parked, until parked_retry has passed.
        for _ in 0..<10 {
            await harness.gateway.handle(
                BLEDiscovery(address: Self.remote, advertisement: AdvertisementData(rssi: -40)))
            await harness.advance(50)
        }
        #expect(harness.ble.connectAttempts.count == 3)
        let health = try #require(json(harness.mqtt.messages(on: "gattway/bridge/health").last?.payloadText ?? ""))
        #expect(health["parked"] == .number(1))
        #expect(health["connect_failures"] == .number(3))
        await harness.advance(100)
        await harness.gateway.waitUntilIdle()
        #expect(harness.ble.connectAttempts.count == 4, "one attempt after parked_retry")
        #expect(harness.mqtt.payloads(on: "gattway/bridge/event").count { $0.contains("device_parked") } == 1)
        // It accepts a connection at last: no longer parked.
        harness.ble.update(Self.remote) { $0.connectError = nil }
        await harness.advance(600)
        await harness.gateway.waitUntilIdle()
        #expect(harness.ble.connectAttempts.count == 5)
        #expect(harness.ble.isConnected(Self.remote))
        await harness.advance(60)
        let after = try #require(json(harness.mqtt.messages(on: "gattway/bridge/health").last?.payloadText ?? ""))
        #expect(after["parked"] == .number(0))
    }

    @Test(
        "a device that fails to connect while it is silent (out of range, not refusing) is never parked, whatever park_after says"
    )
    func awayNotParked() async throws {
        let harness = try await Self.refusingDevice(#"{"park_after": 2}"#)
        // Heard once, then silent: every retry fails, none counts toward parking.
        for _ in 0..<10 { await harness.advance(5) }
        await harness.gateway.waitUntilIdle()
        #expect(harness.ble.connectAttempts.count == 11)
        #expect(!harness.mqtt.payloads(on: "gattway/bridge/event").contains { $0.contains("device_parked") })
        // Back in range and still refusing: two failures heard in a row park it.
        for _ in 0..<2 {
            await Self.heard(harness)
            await harness.advance(5)
        }
        await harness.gateway.waitUntilIdle()
        #expect(harness.mqtt.payloads(on: "gattway/bridge/event").count { $0.contains("device_parked") } == 1)
    }

    @Test("park_after 0: a device that never connects keeps its backoff")
    func neverParked() async throws {
        let harness = try await Self.refusingDevice(#"{"park_after": 0}"#)
        for _ in 0..<20 { await harness.advance(5) }
        await harness.gateway.waitUntilIdle()
        #expect(harness.ble.connectAttempts.count == 21)
        #expect(!harness.mqtt.payloads(on: "gattway/bridge/event").contains { $0.contains("device_parked") })
    }

    @Test(
        "state restoration: a device of the previous run connects at start, before any advertisement; one no rule wants to connect does not"
    )
    func restored() async throws {
        let harness = try Harness(
            #"{"devices": [{"match": {"address": "A4:C1:38:00:00:02"}, "name": "remote", "connect": true}, {"match": {"address": "A4:C1:38:00:00:09"}, "name": "watched"}]}"#
        )
        let watched = address("A4:C1:38:00:00:09")
        harness.ble.add(Self.remote, .init(characteristics: []))
        harness.ble.add(watched, .init(characteristics: []))
        harness.ble.setRestored([
            BLEDiscovery(address: Self.remote, advertisement: AdvertisementData(localName: "Remote")),
            BLEDiscovery(address: watched, advertisement: AdvertisementData()),
        ])
        try await harness.start()
        await harness.gateway.waitUntilIdle()
        #expect(harness.ble.connectAttempts == [Self.remote])
        #expect(harness.ble.isConnected(Self.remote))
        #expect(harness.mqtt.payloads(on: "gattway/remote/availability").last == Self.online)
    }

    @Test(
        "state restoration: of the saved state the gateway keeps the devices a rule connects and the subscriptions such a rule still asks for, nothing of a device no rule connects; its stop asks the port to keep the state for the next start"
    )
    func restoredKept() async throws {
        let harness = try Harness(
            #"{"devices": [{"match": {"address": "A4:C1:38:00:00:02"}, "name": "remote", "connect": true, "subscribe": [{"service": "180F", "characteristic": "2A19"}, {"characteristic": "2A6E"}]}, {"match": {"address": "A4:C1:38:00:00:09"}, "name": "watched"}]}"#
        )
        let watched = address("A4:C1:38:00:00:09")
        harness.ble.add(Self.remote, .init(characteristics: []))
        harness.ble.setRestored([
            BLEDiscovery(address: Self.remote, advertisement: AdvertisementData()),
            BLEDiscovery(address: watched, advertisement: AdvertisementData()),
        ])
        try await harness.start()
        func saved(_ service: UInt16, _ uuid: UInt16) -> BLECharacteristic {
            BLECharacteristic(service: BluetoothUUID(service), uuid: BluetoothUUID(uuid), properties: [])
        }
        #expect(harness.ble.keepsRestored(Self.remote, saved(0x180F, 0x2A19)) == true)
        #expect(harness.ble.keepsRestored(Self.remote, saved(0x181A, 0x2A6E)) == true, "any service")
        #expect(harness.ble.keepsRestored(Self.remote, saved(0x180F, 0x2A1A)) == false, "not subscribed to")
        #expect(harness.ble.keepsRestored(Self.remote, saved(0x181A, 0x2A19)) == false, "another service")
        #expect(harness.ble.keepsRestored(watched, saved(0x180F, 0x2A19)) == false, "its rule does not connect")
        #expect(harness.ble.keepsRestored(address("A4:C1:38:00:00:0A"), saved(0x180F, 0x2A19)) == false)
        #expect(harness.ble.keptRestoredDevices == [Self.remote], "the device a rule connects, not the watched one")
        #expect(harness.ble.keptForRestart == 0)
        await harness.gateway.stop()
        #expect(harness.ble.keptForRestart == 1, "a clean stop keeps what the next start restores")
    }

    @Test(
        "the production reconnect rule in the gateway (not the fixed-delay stand-in): first retry after 1–5 s, then twice the delay ±20 %, back to 1–5 s after a link that stayed up 30 s"
    )
    func productionReconnect() async throws {
        let harness = try Harness(
            #"{"devices": [{"match": {"address": "A4:C1:38:00:00:02"}, "name": "remote", "connect": true}]}"#,
            reconnect: { ReconnectPolicy<SystemRandomNumberGenerator>() })
        harness.ble.add(Self.remote, .init(characteristics: []))
        try await harness.start()
        await harness.gateway.handle(BLEDiscovery(address: Self.remote, advertisement: AdvertisementData(rssi: -40)))
        await harness.gateway.waitUntilIdle()
        #expect(harness.ble.isConnected(Self.remote))
        /// Drops the link and returns the seconds (in 0.1 s steps) until the gateway tries again.
        func retryDelay() async -> Double {
            let attempts = harness.ble.connectAttempts.count
            harness.ble.dropLink(Self.remote)
            await harness.settle()
            var waited = 0.0
            while harness.ble.connectAttempts.count == attempts, waited < 120 {
                await harness.advance(0.1)
                waited += 0.1
            }
            await harness.gateway.waitUntilIdle()
            return waited
        }
        let first = await retryDelay()
        #expect(first >= 0.95 && first <= 5.05, "first retry after \(first) s")
        let second = await retryDelay()
        #expect(
            second >= first * 1.6 - 0.15 && second <= first * 2.4 + 0.15,
            "second retry after \(second) s (first \(first) s)")
        // A link that stayed up 30 s: the backoff starts again.
        await harness.advance(31)
        let third = await retryDelay()
        #expect(third >= 0.95 && third <= 5.05, "after a stable link, retry after \(third) s")
    }

    @Test("operation_not_supported is never retried")
    func giveUp() async throws {
        let harness = try Harness(#"{"devices": [{"match": {"address": "A4:C1:38:00:00:02"}, "connect": true}]}"#)
        harness.ble.add(
            Self.remote, .init(characteristics: [], connectError: BLEPortError(.operationNotSupported, "not supported"))
        )
        try await harness.start()
        await harness.gateway.handle(BLEDiscovery(address: Self.remote, advertisement: AdvertisementData(rssi: -40)))
        await harness.gateway.waitUntilIdle()
        await harness.advance(3600)
        await harness.gateway.handle(BLEDiscovery(address: Self.remote, advertisement: AdvertisementData(rssi: -40)))
        await harness.gateway.waitUntilIdle()
        #expect(harness.ble.connectAttempts.count == 1)
    }

    @Test("the adapter back (powered on again, bluetoothd restarted): a device waiting for its retry connects at once")
    func adapterReady() async throws {
        let harness = try Harness(
            #"{"devices": [{"match": {"address": "A4:C1:38:00:00:02"}, "name": "remote", "connect": true}]}"#,
            retryDelay: 60)
        harness.ble.add(Self.remote, .init(characteristics: []))
        try await harness.start()
        await harness.gateway.handle(BLEDiscovery(address: Self.remote, advertisement: AdvertisementData(rssi: -40)))
        await harness.gateway.waitUntilIdle()
        harness.ble.dropLink(Self.remote)
        await harness.advance(1)
        #expect(harness.ble.connectAttempts.count == 1)  // the retry is 60 s away
        harness.ble.adapterReady()
        await harness.settle()
        await harness.gateway.waitUntilIdle()
        #expect(harness.ble.connectAttempts.count == 2)
        #expect(harness.ble.isConnected(Self.remote))
        #expect(harness.mqtt.payloads(on: "gattway/remote/availability").last == Self.online)
        // Connected now: the old retry time passes without another connect, and the next
        // adapterReady leaves the link alone.
        await harness.advance(60)
        harness.ble.adapterReady()
        await harness.settle()
        #expect(harness.ble.connectAttempts.count == 2)
    }

    @Test("the adapter back does not retry a device given up on")
    func adapterReadyGivenUp() async throws {
        let harness = try Harness(#"{"devices": [{"match": {"address": "A4:C1:38:00:00:02"}, "connect": true}]}"#)
        harness.ble.add(
            Self.remote, .init(characteristics: [], connectError: BLEPortError(.operationNotSupported, "not supported"))
        )
        try await harness.start()
        await harness.gateway.handle(BLEDiscovery(address: Self.remote, advertisement: AdvertisementData(rssi: -40)))
        await harness.gateway.waitUntilIdle()
        harness.ble.adapterReady()
        await harness.settle()
        await harness.gateway.waitUntilIdle()
        #expect(harness.ble.connectAttempts.count == 1)
    }

    @Test("bridge/state is online (retained) at start; the last will and stop() say offline")
    func bridgeState() async throws {
        let harness = try Harness("{}")
        let will = Gateway.lastWill(for: harness.config)
        #expect(will.topic == "gattway/bridge/state" && will.payloadText == Self.offline && will.retain)
        try await harness.start()
        #expect(harness.mqtt.payloads(on: "gattway/bridge/state") == [Self.online])
        #expect(harness.mqtt.messages(on: "gattway/bridge/state").first?.retain == true)
        #expect(
            Set(harness.mqtt.filters) == [
                "gattway/+/set", "gattway/+/set/+", "gattway/+/get", "gattway/bridge/request/#",
            ])
        await harness.gateway.stop()
        #expect(harness.mqtt.payloads(on: "gattway/bridge/state") == [Self.online, Self.offline])
    }

    @Test("many devices appearing at once give one bridge/devices at once and one merged a second later")
    func devicesListThrottled() async throws {
        let harness = try Harness(#"{"devices": [{"match": {"services": ["FCD2"]}}]}"#)
        try await harness.gateway.start()
        let before = harness.mqtt.payloads(on: "gattway/bridge/devices").count
        for n in 0..<100 {
            await harness.gateway.handle(bthome(address(String(format: "A4:C1:38:00:01:%02X", n))))
        }
        #expect(harness.mqtt.payloads(on: "gattway/bridge/devices").count - before <= 1)
        await harness.advance(1)
        let lists = harness.mqtt.payloads(on: "gattway/bridge/devices")
        #expect(lists.count - before <= 2, "100 changes within a second are merged")
        guard case .array(let list)? = json(lists.last ?? "") else {
            Issue.record("bridge/devices is not a list")
            return
        }
        #expect(list.count == 100, "the merged publication lists every device")
    }

    @Test(
        "bridge/info and bridge/devices are retained; devices lists matched devices with address, rssi, connected, services"
    )
    func bridgeTopics() async throws {
        let harness = try Harness(#"{"devices": [{"match": {"services": ["FCD2"]}}]}"#)
        try await harness.start()
        let info = json(harness.mqtt.payloads(on: "gattway/bridge/info").last ?? "")
        #expect(info?["base_topic"] == .string("gattway"))
        #expect(info?["config"]?["max_connections"] == .number(3))
        #expect(harness.mqtt.messages(on: "gattway/bridge/info").first?.retain == true)
        await harness.gateway.handle(bthome(Self.sensor, rssi: -55))
        await harness.advance(1)  // bridge/devices goes out at most once a second
        let devices = json(harness.mqtt.payloads(on: "gattway/bridge/devices").last ?? "")
        guard case .array(let list)? = devices else {
            Issue.record("bridge/devices is not a list")
            return
        }
        #expect(list.count == 1)
        #expect(list.first?["name"] == .string("A4C138000001"))
        #expect(list.first?["address"] == .string("A4:C1:38:00:00:01"))
        #expect(list.first?["rssi"] == .number(-55))
        #expect(list.first?["connected"] == .bool(false))
        #expect(harness.mqtt.messages(on: "gattway/bridge/devices").allSatisfy { $0.retain })
        let event = json(harness.mqtt.payloads(on: "gattway/bridge/event").last ?? "")
        #expect(event?["type"] == .string("device_seen"))
        #expect(event?["data"]?["address"] == .string("A4:C1:38:00:00:01"))
    }

    @Test("bridge/devices text: every device in registration order, with local name, services, format, link and rule")
    func devicesListText() async throws {
        let harness = try Harness(
            """
            {"devices": [{"match": {"address": "A4:C1:38:00:00:02"}, "name": "remote", "connect": true,
                          "subscribe": [{"characteristic": "2A19"}]},
                         {"match": {"services": ["FCD2"]}}]}
            """)
        harness.ble.add(
            Self.remote,
            .init(characteristics: [
                BLECharacteristic(
                    service: BluetoothUUID(0x180F), uuid: BluetoothUUID(0x2A19), properties: [.read, .notify])
            ]))
        try await harness.start()
        #expect(harness.mqtt.payloads(on: "gattway/bridge/devices").last == "[]")
        await harness.gateway.handle(
            BLEDiscovery(
                address: Self.remote,
                advertisement: AdvertisementData(
                    localName: "Remote \"1\"", serviceUUIDs: [BluetoothUUID(0x180F)], rssi: -70)))
        await harness.gateway.waitUntilIdle()
        await harness.gateway.handle(bthome(Self.sensor, rssi: -55))
        await harness.gateway.handle(bthome(address("A4:C1:38:00:00:03"), rssi: -81))
        await harness.advance(1)
        let expected =
            #"[{"name":"remote","address":"A4:C1:38:00:00:02","local_name":"Remote \"1\"","rssi":-70,"connected":true,"services":["180F"],"rule":0},"#
            + #"{"name":"A4C138000001","address":"A4:C1:38:00:00:01","rssi":-55,"connected":false,"services":[],"format":"bthome_v2","rule":1},"#
            + #"{"name":"A4C138000003","address":"A4:C1:38:00:00:03","rssi":-81,"connected":false,"services":[],"format":"bthome_v2","rule":1}]"#
        #expect(harness.mqtt.payloads(on: "gattway/bridge/devices").last == expected)
    }

    @Test(
        "max_devices full: the longest-silent device goes (its retained state cleared), the newest are listed and publish"
    )
    func evictionKeepsNewest() async throws {
        let harness = try Harness(
            #"{"mqtt": {"retain": true}, "bluetooth": {"max_devices": 3}, "devices": [{"match": {"services": ["FCD2"]}}]}"#
        )
        try await harness.start()
        let addresses = (1...5).map { address("C0:00:00:00:00:0\($0)") }
        for device in addresses.prefix(3) {
            await harness.gateway.handle(bthome(device))
            await harness.advance(1)
        }
        // The first one advertises again: the second is now the longest silent.
        await harness.gateway.handle(bthome(addresses[0]))
        await harness.advance(1)
        for device in addresses.suffix(2) {
            await harness.gateway.handle(bthome(device, rssi: -42))
            await harness.advance(1)
        }
        let list = json(harness.mqtt.payloads(on: "gattway/bridge/devices").last ?? "")
        guard case .array(let entries)? = list else { Issue.record("no bridge/devices"); return }
        #expect(entries.map { $0["name"] } == ["C00000000001", "C00000000004", "C00000000005"].map { .string($0) })
        // The evicted devices' retained state and availability are cleared, each once.
        for gone in ["C00000000002", "C00000000003"] {
            #expect(harness.mqtt.messages(on: "gattway/" + gone).last?.payload == [])
            #expect(harness.mqtt.messages(on: "gattway/" + gone + "/availability").last?.payload == [])
        }
        #expect(harness.mqtt.messages(on: "gattway/C00000000001").allSatisfy { !$0.payload.isEmpty })
        let newest = harness.mqtt.payloads(on: "gattway/C00000000005").last ?? ""
        #expect(newest.hasPrefix(#"{"temperature":25.06,"humidity":50.55,"rssi":-42"#))
        #expect(await harness.gateway.counters.devicesRemoved == 2)
    }

    @Test("after an MQTT reconnect the retained bridge state and availability are published again")
    func republishOnReconnect() async throws {
        let harness = try Harness(#"{"devices": [{"match": {"services": ["FCD2"]}}]}"#)
        try await harness.start()
        await harness.gateway.handle(bthome(Self.sensor))
        harness.mqtt.clear()
        harness.mqtt.setConnected(true)
        await harness.mqtt.waitFor("gattway/A4C138000001/availability")
        #expect(harness.mqtt.payloads(on: "gattway/bridge/state") == [Self.online])
        #expect(harness.mqtt.payloads(on: "gattway/A4C138000001/availability") == [Self.online])
    }
}
