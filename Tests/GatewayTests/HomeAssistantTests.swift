import Bluetooth
import Foundation
import Gateway
import JSON
import Testing

@Suite("Home Assistant discovery, device removal and the registry bound")
struct HomeAssistantTests {
    static let sensor = address("A4:C1:38:00:00:01")
    static let lamp = address("A4:C1:38:00:00:10")
    /// BTHome v2: temperature 25.06 °C, humidity 50.55 %, opening (binary) true.
    static let withOpening: [UInt8] = [0x40, 0x02, 0xCA, 0x09, 0x03, 0xBF, 0x13, 0x11, 0x01]

    static let config = """
        {"homeassistant": {"enabled": true},
         "devices": [{"match": {"address": "A4:C1:38:00:00:10"}, "name": "lamp",
                      "commands": {"power": {"characteristic": "FFF1", "encoding": "bool"},
                                   "brightness": {"characteristic": "FFF1", "encoding": "u8", "maximum": 100},
                                   "identify": {"characteristic": "FFF2", "encoding": "u8", "press": 1},
                                   "mode": {"characteristic": "FFF2", "encoding": "utf8", "options": ["eco", "boost"]},
                                   "label": {"characteristic": "FFF3", "encoding": "utf8"},
                                   "raw": {"characteristic": "FFF3", "encoding": "hex"}}},
                     {"match": {"services": ["FCD2"]}}]}
        """

    static func configs(_ harness: Harness) -> [MQTTOutboundMessage] {
        harness.mqtt.published.filter { $0.topic.hasPrefix("homeassistant/") && $0.topic.hasSuffix("/config") }
    }

    func started(_ text: String = Self.config) async throws -> Harness {
        let harness = try Harness(text)
        try await harness.start()
        await harness.gateway.handle(bthome(Self.sensor, payload: Self.withOpening))
        await harness.gateway.handle(BLEDiscovery(address: Self.lamp, advertisement: AdvertisementData(rssi: -50)))
        return harness
    }

    /// What HA's MQTT discovery documentation requires per component (plus what the entity
    /// registry needs: `unique_id` and `device`).
    static let required: [(component: String, keys: [String])] = [
        ("sensor", ["state_topic"]),
        ("binary_sensor", ["state_topic"]),
        ("switch", ["command_topic"]),
        ("number", ["command_topic", "min", "max"]),
        ("button", ["command_topic"]),
        ("select", ["command_topic", "options"]),
        ("text", ["command_topic"]),
    ]

    @Test(
        "every config carries the keys its component requires, unique ids, a device block via the bridge and the availability list",
        arguments: required)
    func requiredKeys(component: String, keys: [String]) async throws {
        let harness = try await started()
        let device = Self.configs(harness).filter { $0.topic.hasPrefix("homeassistant/\(component)/gattway_A4C1") }
        #expect(!device.isEmpty, "no \(component) config")
        for message in device {
            #expect(message.retain, "\(message.topic) not retained")
            let payload = try #require(json(message.payloadText))
            for key in keys + ["name", "unique_id", "device", "availability", "availability_mode"] {
                #expect(payload[key] != nil, "\(message.topic) lacks \(key)")
            }
            #expect(payload["availability_mode"] == .string("all"))
            guard case .array(let availability)? = payload["availability"] else { continue }
            let topics = availability.compactMap { $0["topic"] }
            #expect(topics.first == .string("gattway/bridge/state"))
            #expect(
                topics.count == 2
                    && topics.last.map { if case .string(let t) = $0 { t.hasSuffix("/availability") } else { false } }
                        == true
            )
            #expect(payload["device"]?["via_device"] == .string("gattway_bridge"))
            #expect(payload["device"]?["identifiers"] != nil)
            let levels = message.topic.split(separator: "/")
            #expect(levels.count == 5 && !levels[2].contains(":") && !levels[3].contains(":"))
        }
    }

    @Test(
        "readings become sensor/binary_sensor with units, device classes and value templates; commands become switch, number, button, select, text"
    )
    func componentsAndUnits() async throws {
        let harness = try await started()
        let byTopic = Dictionary(
            Self.configs(harness).map { ($0.topic, json($0.payloadText)) }, uniquingKeysWith: { $1 })
        let temperature = try #require(byTopic["homeassistant/sensor/gattway_A4C138000001/temperature/config"] ?? nil)
        #expect(temperature["unit_of_measurement"] == .string("°C"))
        #expect(temperature["device_class"] == .string("temperature"))
        #expect(temperature["state_class"] == .string("measurement"))
        #expect(temperature["state_topic"] == .string("gattway/A4C138000001"))
        #expect(temperature["value_template"] == .string("{{ value_json.temperature }}"))
        #expect(temperature["name"] == .string("Temperature"))
        let opening = try #require(byTopic["homeassistant/binary_sensor/gattway_A4C138000001/opening/config"] ?? nil)
        #expect(opening["device_class"] == .string("opening"))
        #expect(byTopic["homeassistant/switch/gattway_A4C138000010/power/config"] != nil)
        let brightness = try #require(byTopic["homeassistant/number/gattway_A4C138000010/brightness/config"] ?? nil)
        #expect(brightness["command_topic"] == .string("gattway/lamp/set/brightness"))
        #expect(brightness["min"] == .number(0) && brightness["max"] == .number(100))
        #expect(byTopic["homeassistant/button/gattway_A4C138000010/identify/config"]??["payload_press"] == .string("1"))
        #expect(
            byTopic["homeassistant/select/gattway_A4C138000010/mode/config"]??["options"]
                == .array([.string("eco"), .string("boost")]))
        #expect(byTopic["homeassistant/text/gattway_A4C138000010/label/config"] != nil)
        #expect(!byTopic.keys.contains { $0.contains("/raw/") }, "a hex command has no entity")
        let uniqueIDs = byTopic.values.compactMap { $0?["unique_id"] }
        #expect(Set(uniqueIDs.map(\.serialized)).count == uniqueIDs.count)
        #expect(byTopic.values.allSatisfy { $0?["device"]?["name"] != nil })
    }

    @Test("the bridge's config comes before every config naming it in via_device")
    func bridgeFirst() async throws {
        let harness = try await started()
        let topics = Self.configs(harness).map(\.topic)
        let bridge = try #require(topics.firstIndex { $0.contains("/gattway_bridge/") })
        let firstDevice = try #require(topics.firstIndex { $0.contains("/gattway_A4C1") })
        #expect(bridge < firstDevice)
    }

    @Test(
        "the first state of a device with new configs waits state_delay (HA drops states that arrive right after a new config)"
    )
    func stateHeld() async throws {
        let harness = try await started()
        #expect(harness.mqtt.messages(on: "gattway/A4C138000001").isEmpty)
        await harness.advance(0.9)
        #expect(harness.mqtt.messages(on: "gattway/A4C138000001").isEmpty)
        await harness.advance(0.1)
        #expect(harness.mqtt.payloads(on: "gattway/A4C138000001").count == 1)
        // Known entities: the next reading goes out at once.
        await harness.gateway.handle(
            bthome(Self.sensor, payload: [0x40, 0x02, 0xCB, 0x09, 0x03, 0xBF, 0x13, 0x11, 0x00]))
        #expect(harness.mqtt.payloads(on: "gattway/A4C138000001").count == 2)
    }

    @Test("readings during the hold are all published, in order, when it ends: none is merged away")
    func heldReadingsKeptInOrder() async throws {
        let harness = try await started()
        // Temperatures 25.07, 25.08, 25.09 °C while the first state is held.
        for (step, low) in [UInt8(0xCB), 0xCC, 0xCD].enumerated() {
            await harness.advance(0.2)
            await harness.gateway.handle(
                bthome(Self.sensor, payload: [0x40, 0x02, low, 0x09, 0x03, 0xBF, 0x13, 0x11, UInt8(step % 2)]))
        }
        #expect(harness.mqtt.messages(on: "gattway/A4C138000001").isEmpty)
        await harness.advance(0.4)
        let temperatures = harness.mqtt.payloads(on: "gattway/A4C138000001").compactMap { json($0)?["temperature"] }
        #expect(temperatures == [.number(25.06), .number(25.07), .number(25.08), .number(25.09)])
    }

    @Test(
        "after an MQTT reconnect the configs are republished but readings go out at once (HA holds states only on its own online)"
    )
    func reconnectDoesNotHold() async throws {
        let harness = try await started()
        await harness.advance(1)
        let configs = Self.configs(harness).count
        let states = harness.mqtt.messages(on: "gattway/A4C138000001").count
        await harness.gateway.handle(mqttConnected: false)
        await harness.gateway.handle(mqttConnected: true)
        #expect(Self.configs(harness).count == 2 * configs)
        await harness.gateway.handle(
            bthome(Self.sensor, payload: [0x40, 0x02, 0xCB, 0x09, 0x03, 0xBF, 0x13, 0x11, 0x00]))
        #expect(harness.mqtt.messages(on: "gattway/A4C138000001").count == states + 1)
        await harness.advance(2)
        #expect(harness.mqtt.messages(on: "gattway/A4C138000001").count == states + 1)
    }

    @Test(
        "a reconnect republishes 100 devices' configs in steps of 32 devices, pausing while the MQTT client holds a quarter of max_queued, until every config is out"
    )
    func republishIsPaced() async throws {
        let harness = try Harness(
            #"{"homeassistant": {"enabled": true}, "devices": [{"match": {"services": ["FCD2"]}}]}"#)
        harness.mqtt.backlogLimit = 400  // a window of 100 messages
        try await harness.start()
        let sensors = (0..<100).map { address(String(format: "A4:C1:38:00:01:%02X", $0)) }
        for sensor in sensors { await harness.gateway.handle(bthome(sensor, payload: Self.withOpening)) }
        let perDevice = Self.configs(harness).filter { $0.topic.contains("gattway_A4C138000100") }.count
        #expect(perDevice >= 4)
        let devices = { (from: Int) in
            Set(
                Self.configs(harness).dropFirst(from).compactMap { message in
                    sensors.first { message.topic.contains("gattway_" + $0.description.replacing(":", with: "")) }
                })
        }
        let before = Self.configs(harness).count
        await harness.gateway.handle(mqttConnected: false)
        await harness.gateway.handle(mqttConnected: true)
        #expect(devices(before).count == 32, "the first step, at once")
        harness.mqtt.backlog = 100
        await harness.advance(0.5)
        #expect(devices(before).count == 32, "no step while the client holds the window")
        harness.mqtt.backlog = 99
        await harness.advance(0.02)
        #expect(devices(before).count == 64)
        harness.mqtt.backlog = 0
        await harness.advance(0.02)
        #expect(devices(before).count == 96)
        await harness.advance(0.02)
        #expect(devices(before) == Set(sensors))
        let republished = Self.configs(harness).dropFirst(before).filter { !$0.topic.contains("gattway_bridge") }
        #expect(republished.count == 100 * perDevice, "each device's configs once")
        // A reconnect in the middle of a sweep starts it again from the first device.
        let second = Self.configs(harness).count
        await harness.gateway.handle(mqttConnected: false)
        await harness.gateway.handle(mqttConnected: true)
        await harness.gateway.handle(mqttConnected: false)
        await harness.advance(0.5)
        #expect(devices(second).count == 32, "nothing more after the connection was lost")
    }

    @Test(
        "homeassistant/status online republishes every config after a random delay up to republish_delay, bridge first, then the states"
    )
    func republishOnHomeAssistantStart() async throws {
        let harness = try await started(
            Self.config.replacingOccurrences(
                of: #""enabled": true"#, with: #""enabled": true, "republish_delay": "5s""#))
        await harness.advance(1)
        let before = Self.configs(harness).count
        let statesBefore = harness.mqtt.messages(on: "gattway/A4C138000001").count
        #expect(harness.mqtt.filters.contains("homeassistant/status"))
        await harness.gateway.handle(MQTTInboundMessage(topic: "homeassistant/status", payload: Array("online".utf8)))
        await harness.advance(5)
        let after = Array(Self.configs(harness).dropFirst(before))
        #expect(after.count == before)
        #expect(after.first?.topic.contains("/gattway_bridge/") == true)
        await harness.advance(1)
        #expect(harness.mqtt.messages(on: "gattway/A4C138000001").count == statesBefore + 1)
        // offline (HA stopping) changes nothing
        await harness.gateway.handle(MQTTInboundMessage(topic: "homeassistant/status", payload: Array("offline".utf8)))
        await harness.advance(10)
        #expect(Self.configs(harness).count == 2 * before)
    }

    @Test("bridge/request/device/remove clears every config (empty retained), the device and its retained availability")
    func removeOnRequest() async throws {
        let harness = try await started()
        let topics = Set(Self.configs(harness).filter { $0.topic.contains("gattway_A4C138000001") }.map(\.topic))
        #expect(topics.count >= 4)
        harness.mqtt.clear()
        let responses = await harness.command(
            "gattway/bridge/request/device/remove", #"{"device": "A4C138000001", "transaction": 7}"#,
            responseTopic: "gattway/bridge/response/device/remove")
        #expect(json(responses.last?.payloadText ?? "")?["status"] == .string("ok"))
        #expect(json(responses.last?.payloadText ?? "")?["transaction"] == .number(7))
        let removals = Self.configs(harness)
        #expect(Set(removals.map(\.topic)) == topics)
        #expect(removals.allSatisfy { $0.payload.isEmpty && $0.retain })
        #expect(harness.mqtt.messages(on: "gattway/A4C138000001/availability").map(\.payload) == [[]])
        #expect(harness.mqtt.payloads(on: "gattway/bridge/event").contains { $0.contains("device_removed") })
        await harness.advance(1)  // bridge/devices goes out at most once a second
        #expect(harness.mqtt.payloads(on: "gattway/bridge/devices").last?.contains("A4:C1:38:00:00:01") == false)
        let unknown = await harness.command(
            "gattway/bridge/request/device/remove", #"{"device": "nope"}"#,
            responseTopic: "gattway/bridge/response/device/remove")
        #expect(json(unknown.last?.payloadText ?? "")?["status"] == .string("error"))
    }

    @Test(
        "advertisement-only devices silent for forget_after are forgotten (configs removed); devices named by address stay"
    )
    func forgetSilentDevices() async throws {
        let harness = try await started(
            Self.config.replacingOccurrences(
                of: #"{"homeassistant": {"enabled": true},"#,
                with: #"{"homeassistant": {"enabled": true}, "bluetooth": {"forget_after": "30m"},"#))
        await harness.advance(1799)
        #expect(!Self.configs(harness).contains { $0.payload.isEmpty })
        await harness.advance(1)
        let removed = Self.configs(harness).filter { $0.payload.isEmpty }.map(\.topic)
        #expect(!removed.isEmpty && removed.allSatisfy { $0.contains("gattway_A4C138000001") })
        #expect(await harness.gateway.counters.devicesRemoved == 1)
        let devices = harness.mqtt.payloads(on: "gattway/bridge/devices").last ?? ""
        #expect(!devices.contains("A4:C1:38:00:00:01") && devices.contains("A4:C1:38:00:00:10"))
        // It comes back with its next advertisement.
        await harness.gateway.handle(bthome(Self.sensor))
        await harness.advance(1)
        #expect(harness.mqtt.payloads(on: "gattway/bridge/devices").last?.contains("A4:C1:38:00:00:01") == true)
    }

    @Test(
        "max_devices bounds the registry under rotating random addresses: the longest-silent device makes room, counted"
    )
    func registryBound() async throws {
        let harness = try Harness(#"{"bluetooth": {"max_devices": 3}, "devices": [{"match": {"services": ["FCD2"]}}]}"#)
        try await harness.start()
        for octet in 0..<50 {
            await harness.gateway.handle(bthome(address("C0:00:00:00:00:\(String(format: "%02X", octet))")))
            await harness.advance(1)
        }
        let devices = json(harness.mqtt.payloads(on: "gattway/bridge/devices").last ?? "")
        guard case .array(let list)? = devices else { Issue.record("no bridge/devices"); return }
        #expect(list.count == 3)
        #expect(list.last?["address"] == .string("C0:00:00:00:00:31"))
        #expect(await harness.gateway.counters.dropped.registryFull == 47)
        #expect(await harness.gateway.healthPayload["devices"] == .number(3))
    }
}
