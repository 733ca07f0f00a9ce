import BlueZSimulator
import Bluetooth
import EventLoop
import Foundation
import MQTT
import TestSupport
import Testing

/// Two `gattway run` in fleet mode on one mosquitto, each with its own simulated radio (a private
/// bus and a BlueZ simulator) in which the same BTHome sensor is heard at a different RSSI. Which
/// gateway published a state shows in its `rssi`; the sensor's `packet_id` counts up by one per
/// advertisement, so a reading published twice shows as a repeated `packet_id`.
@Suite("End to end: a fleet of gateways", .serialized)
struct FleetTests {
    static let sensor = "A4:C1:38:00:00:04"

    static let lamp = "A4:C1:38:00:00:03"

    /// One gateway's radio: a bus, the simulator with only `device` (the BTHome sensor by
    /// default) at `rssi`.
    struct Radio {
        let daemon: DBusDaemon
        let simulator: BlueZSimulator

        static func start(rssi: Double, device: String = FleetTests.sensor, on loop: EventLoop) async throws -> Radio {
            let scenario = try EndToEnd.fastDemo { scenario in
                scenario.devices = scenario.devices.filter { $0.address.description == device }
                scenario.devices[0].rssi = rssi
                scenario.devices[0].rssiJitter = 1
                // Every radio hears the same advertisement at the same time, with the same
                // packet id (as gateways of a fleet hear one device).
                scenario.devices[0].aligned = true
            }
            let daemon = try await DBusDaemon()
            let simulator = try await BlueZSimulator.start(scenario: scenario, bus: .address(daemon.address), on: loop)
            return Radio(daemon: daemon, simulator: simulator)
        }

        func stop() async {
            await simulator.stop()
            daemon.stop()
        }
    }

    /// Two gateways in fleet mode, gw-a and gw-b, each on its own radio (`device` at `levels[0]`
    /// and `levels[1]`), a mosquitto and an observer recording `#`; `config` makes a gateway's
    /// config.json from its id and the broker's URL. Stops everything whether `body` returns or
    /// throws.
    struct World {
        let radios: [Radio]
        let gateways: [ChildProcess]
        let messages: MessageRecorder
        let observer: MQTTClient

        /// The end of each gateway's log, for a failure's message.
        func logs() -> String {
            zip(["gw-a", "gw-b"], gateways).map { name, gateway in
                "--- \(name) ---\n" + gateway.log().split(separator: "\n").suffix(30).joined(separator: "\n")
            }.joined(separator: "\n")
        }

        static func run(
            device: String = FleetTests.sensor, levels: [Double], config: (String, String) -> String,
            _ body: (World) async throws -> Void
        ) async throws {
            let loop = EventLoop(name: "fleet-e2e")
            let broker = try await MosquittoBroker()
            try await broker.start()
            var radios: [Radio] = []
            var gateways: [ChildProcess] = []
            let observer = try MQTTClient(
                configuration: try MQTTConfiguration(url: broker.url, clientID: "fleet-observer"), loop: loop)
            func stopAll() async {
                for gateway in gateways { gateway.stop(grace: 5) }
                await observer.disconnect()
                for radio in radios { await radio.stop() }
                loop.shutdown()
                broker.stop()
            }
            do {
                for level in levels { radios.append(try await Radio.start(rssi: level, device: device, on: loop)) }
                try await observer.connect()
                let messages = MessageRecorder()
                let subscription = try await observer.subscribe(to: "#")
                let recording = Task { for await message in subscription { messages.record(message) } }
                defer { recording.cancel() }
                for (id, radio) in zip(["gw-a", "gw-b"], radios) {
                    let path = radio.daemon.directory.appendingPathComponent("config.json")
                    try config(id, broker.url).write(to: path, atomically: true, encoding: .utf8)
                    gateways.append(
                        try ChildProcess(
                            try BuiltProduct.path("gattway"), ["run", "--config", path.path, "--log-level", "debug"],
                            environment: radio.daemon.environment))
                }
                try await body(World(radios: radios, gateways: gateways, messages: messages, observer: observer))
            } catch {
                await stopAll()
                throw error
            }
            await stopAll()
        }
    }

    static func config(_ id: String, broker: String) -> String {
        """
        {
          "mqtt": {"server": "\(broker)", "base_topic": "gattway", "client_id": "\(id)"},
          "bluetooth": {"scan": {"services": []}},
          "homeassistant": {"enabled": false},
          "health": {"enabled": false},
          "fleet": {"enabled": true, "lease": "3s", "handover_after": "2s", "hysteresis_db": 6},
          "devices": [{"match": {"address": "\(sensor)"}, "name": "bthome_th"}]
        }
        """
    }

    static func lampConfig(_ id: String, broker: String) -> String {
        """
        {
          "mqtt": {"server": "\(broker)", "base_topic": "gattway", "client_id": "\(id)"},
          "bluetooth": {"scan": {"services": []}, "connect_timeout": "5s", "gatt_timeout": "3s"},
          "homeassistant": {"enabled": false},
          "health": {"enabled": false},
          "fleet": {"enabled": true, "lease": "3s", "handover_after": "2s"},
          "devices": [{"match": {"address": "\(lamp)"}, "name": "lamp", "connect": true,
            "commands": {"light": {"service": "ff00", "characteristic": "ff01", "encoding": "bool"}}}]
        }
        """
    }

    /// The states of the sensor from `start` on: (packet id, rssi).
    static func states(_ messages: MessageRecorder, from start: Int = 0) -> [(id: Double, rssi: Double)] {
        messages.all.dropFirst(start).filter { $0.topic == "gattway/bthome_th" }.compactMap { state in
            guard let id = state.number("packet_id"), let rssi = state.number("rssi") else { return nil }
            return (id, rssi)
        }
    }

    /// Packet ids published more than once among `states` (the counter wraps at 256: the window
    /// of a test is far shorter than 25 s of advertisements).
    static func repeats(_ states: [(id: Double, rssi: Double)]) -> [Double] {
        var seen = Set<Double>()
        var repeated: [Double] = []
        for state in states where !seen.insert(state.id).inserted { repeated.append(state.id) }
        return repeated
    }

    /// Packet ids between the first and the last of `states` that were never published (the
    /// counter wraps at 256).
    static func missing(_ states: [(id: Double, rssi: Double)]) -> [Int] {
        guard var previous = states.first.map({ Int($0.id) }) else { return [] }
        var missing: [Int] = []
        for state in states.dropFirst() {
            let id = Int(state.id)
            var next = (previous + 1) % 256
            while next != id, missing.count < 1000 {
                missing.append(next)
                next = (next + 1) % 256
            }
            previous = id
        }
        return missing
    }

    /// Which gateway published each state, by its RSSI (`near` = the first radio's level).
    static func sources(_ states: [(id: Double, rssi: Double)], levels: [Double]) -> [Int] {
        states.map { state in
            levels.indices.min { abs(levels[$0] - state.rssi) < abs(levels[$1] - state.rssi) } ?? -1
        }
    }

    @Test(
        "a connect: true device is connected by its owner alone, and a /set runs once, answered once; after the owner is killed the other connects it"
    )
    func connectedDevice() async throws {
        try await World.run(device: Self.lamp, levels: [-55, -75], config: Self.lampConfig) { world in
            let messages = world.messages
            let (radioA, radioB) = (world.radios[0], world.radios[1])
            func logs() -> String { world.logs() }
            try await messages.wait(for: "the lamp online", timeout: 40) {
                $0.topic == "gattway/lamp/availability" && $0.text.contains("online")
            }
            try await Task.sleep(for: .seconds(2))
            let connectsA = await radioA.simulator.counterValues().connects
            let connectsB = await radioB.simulator.counterValues().connects
            #expect(connectsA == 1 && connectsB == 0, "connects: gw-a \(connectsA), gw-b \(connectsB)\n\(logs())")

            let before = messages.count
            try await world.observer.publish(
                MQTTMessage(
                    topic: "gattway/lamp/set", string: #"{"light": true, "transaction": "once"}"#, qos: .atLeastOnce))
            try await messages.wait(for: "the response", after: before, timeout: 20) {
                $0.topic == "gattway/lamp/response" && $0.text.contains("once")
            }
            try await Task.sleep(for: .seconds(3))
            let responses = messages.all.dropFirst(before).filter { $0.topic == "gattway/lamp/response" }
            #expect(responses.count == 1, "\(responses.map(\.text))\n\(logs())")
            #expect(responses.first?.text.contains(#""status":"ok""#) == true, "\(responses.map(\.text))")
            let writesA = await radioA.simulator.recordedWrites.filter {
                $0.uuid.shortDescription == "FF01"
            }
            let writesB = await radioB.simulator.recordedWrites.filter {
                $0.uuid.shortDescription == "FF01"
            }
            #expect(
                writesA.count == 1 && writesB.isEmpty,
                "writes: gw-a \(writesA.count), gw-b \(writesB.count); \(responses.map(\.text))\n\(logs())")

            // The owner dies: the other gateway connects the lamp (its will, then its lease).
            world.gateways[0].kill9()
            try await eventually("gw-b connected the lamp", within: 20) {
                await radioB.simulator.counterValues().connects == 1
            }
        }
    }

    @Test(
        "one owner publishes each reading once; a device that moves is handed over once; a killed owner's devices are taken over within lease + 2 s, without duplicates"
    )
    func ownership() async throws {
        try await World.run(levels: [-60, -80], config: Self.config) { world in
            let messages = world.messages
            let radioA = world.radios[0]
            func logs() -> String { world.logs() }

            // 1. The first lease passes in silence, then gw-a (-60 dBm) alone publishes.
            try await messages.wait(for: "the sensor's state", timeout: 30) { $0.topic == "gattway/bthome_th" }
            try await Task.sleep(for: .seconds(4))
            let first = Self.states(messages)
            #expect(first.count >= 20, "\(first.count) states in 4 s")
            #expect(Self.repeats(first).isEmpty, "packet ids published twice: \(Self.repeats(first))\n\(logs())")
            #expect(Set(Self.sources(first, levels: [-60, -80])) == [0], "\(first.map(\.rssi))")

            // 2. The sensor moves next to gw-b: after handover_after (2 s) gw-b owns it; one change.
            let beforeMove = messages.all.count
            try await radioA.simulator.setRSSI(address: Self.sensor, -90)
            try await messages.wait(for: "a state from gw-b", after: beforeMove, timeout: 20) {
                $0.topic == "gattway/bthome_th" && abs(($0.number("rssi") ?? 0) + 80) <= 3
            }
            try await Task.sleep(for: .seconds(4))
            let moved = Self.states(messages, from: beforeMove)
            let movedSources = Self.sources(moved, levels: [-60, -80, -90]).map { $0 == 1 ? "b" : "a" }
            let switches = zip(movedSources, movedSources.dropFirst()).filter { $0 != $1 }.count
            #expect(switches == 1, "publisher by state: \(movedSources.joined())\n\(logs())")
            #expect(movedSources.last == "b")
            #expect(Self.repeats(moved).isEmpty, "packet ids published twice: \(Self.repeats(moved))\n\(logs())")
            // The handover breaks before it makes: what it can lose is a reading heard between the
            // release and the takeover (one MQTT round trip, the sensor advertises every 100 ms):
            // the ids between gw-a's last state and gw-b's first. (Not every gap of the window: the
            // simulators advertise on the wall clock's slots and skip the slots a loaded machine
            // made them miss: a CI run under load had 10 ids missing, scattered over the window.)
            let firstFromB = movedSources.firstIndex(of: "b") ?? 0
            let lost = firstFromB > 0 ? Self.missing([moved[firstFromB - 1], moved[firstFromB]]) : []
            #expect(lost.count <= 2, "packet ids never published at the handover: \(lost)\n\(logs())")
            let fromB = movedSources.filter { $0 == "b" }.count
            #expect(fromB >= 20, "\(fromB) states from gw-b in the 4 s after the handover")

            // 3. gw-b is killed: gw-a, which still hears the sensor (-90), owns it within lease + 2 s.
            let beforeKill = messages.all.count
            let killedAt = Date()
            world.gateways[1].kill9()
            try await messages.wait(for: "a state from gw-a after the kill", after: beforeKill, timeout: 20) {
                $0.topic == "gattway/bthome_th" && abs(($0.number("rssi") ?? 0) + 90) <= 3
            }
            let takeover = Date().timeIntervalSince(killedAt)
            #expect(takeover <= 3 + 2 + 1, "took \(takeover) s\n\(logs())")
            try await Task.sleep(for: .seconds(2))
            let afterKill = Self.states(messages, from: beforeMove)
            #expect(
                Self.repeats(afterKill).isEmpty, "packet ids published twice: \(Self.repeats(afterKill))\n\(logs())")
        }
    }

    /// The sensor pinned to gw-a (`prefer_gateway`), and the same sensor as the presence
    /// identity `tag` on both gateways (each its own room, its gateway_id).
    static func preferConfig(_ id: String, broker: String) -> String {
        """
        {
          "mqtt": {"server": "\(broker)", "base_topic": "gattway", "client_id": "\(id)"},
          "bluetooth": {"scan": {"services": []}},
          "homeassistant": {"enabled": false},
          "health": {"enabled": false},
          "fleet": {"enabled": true, "lease": "3s", "handover_after": "2s", "hysteresis_db": 6},
          "presence": {"identities": [{"name": "tag", "address": "\(sensor)"}]},
          "devices": [{"match": {"address": "\(sensor)"}, "name": "bthome_th", "prefer_gateway": "gw-a"}]
        }
        """
    }

    @Test(
        "prefer_gateway: the preferred gateway publishes the device although the other hears it 30 dB better, and the presence room is the better one; the preferred killed, the other takes the device over"
    )
    func preferredGateway() async throws {
        try await World.run(levels: [-85, -55], config: Self.preferConfig) { world in
            let messages = world.messages
            func logs() -> String { world.logs() }

            // After the first lease gw-a (-85 dBm, above the floor of -90) alone publishes the sensor.
            try await messages.wait(for: "the sensor's state", timeout: 30) { $0.topic == "gattway/bthome_th" }
            try await Task.sleep(for: .seconds(5))
            let states = Self.states(messages)
            #expect(states.count >= 20, "\(states.count) states in 5 s")
            #expect(Set(Self.sources(states, levels: [-85, -55])) == [0], "\(states.map(\.rssi))\n\(logs())")
            #expect(Self.repeats(states).isEmpty, "packet ids published twice: \(Self.repeats(states))")

            // The presence identity goes by the RSSI alone: gw-b publishes it, with its room.
            let tags = messages.all.filter { $0.topic == "gattway/presence/tag" }
            #expect(!tags.isEmpty, "no presence message\n\(logs())")
            #expect(tags.allSatisfy { $0.string("room") == "gw-b" }, "\(tags.map(\.text))\n\(logs())")

            // gw-a is killed: gw-b owns the sensor within lease + 2 s.
            let beforeKill = messages.all.count
            let killedAt = Date()
            world.gateways[0].kill9()
            try await messages.wait(for: "a state from gw-b after the kill", after: beforeKill, timeout: 20) {
                $0.topic == "gattway/bthome_th" && abs(($0.number("rssi") ?? 0) + 55) <= 3
            }
            let takeover = Date().timeIntervalSince(killedAt)
            #expect(takeover <= 3 + 2 + 1, "took \(takeover) s\n\(logs())")
        }
    }
}
