import BlueZSimulator
import EventLoop
import Foundation
import JSON
import TestSupport
import Testing

/// `bluetooth.radio`: `gattway run` reading the simulator's management socket (the kernel's
/// protocol, every report) or bluetoothd's D-Bus view, as a user sees it on MQTT.
@Suite("End to end: the radio")
struct RadioTests {
    /// A world of one adapter, hci0 (or `adapters`, JSON objects of the scenario's `adapters`),
    /// with `devices` (JSON objects of the scenario's `devices`).
    static func world(
        _ devices: String, adapters: String = #"{"name": "hci0", "address": "00:AA:01:00:00:00"}"#
    ) throws -> Scenario {
        try Scenario.parse(
            Data(
                """
                {
                  "timing": {"disconnect_delay": "50ms", "temporary_timeout": "30s", "resolve_delay": "10ms", "gatt_latency": 0},
                  "adapters": [\(adapters)],
                  "devices": [\(devices)]
                }
                """.utf8))
    }

    /// One BTHome v2 sensor that sends each packet id in four advertising events in a row, as
    /// real sensors repeat a frame, every 40 ms.
    static func repeatingSensor() throws -> Scenario {
        try world(
            #"""
                    {"address": "A4:C1:38:00:00:04", "address_type": "public", "rssi": -60, "interval": "40ms", "connectable": false,
                     "service_data": {"FCD2": {"template": "bthome_v2", "fields": {
                       "packet_id": {"sequence": [1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6]},
                       "temperature": 21.5}}}}
            """#)
    }

    static func config(radio: String) -> String {
        """
        {
          "mqtt": {"server": "$SERVER", "base_topic": "gattway", "client_id": "gattway-e2e"},
          "bluetooth": {"adapter": "hci0", "radio": "\(radio)"},
          "health": {"interval": "1s"},
          "devices": [{"match": {"address": "A4:C1:38:00:00:04"}, "name": "bthome_th"}]
        }
        """
    }

    @Test(
        "each packet id of a sensor that repeats its frames reaches MQTT once, on both paths; bridge/health names the path",
        arguments: ["mgmt", "dbus"])
    func repeatsPublishedOnce(radio: String) async throws {
        try await EndToEnd.run(
            config: Self.config(radio: radio), scenario: try Self.repeatingSensor(), managementSocket: true
        ) { e2e in
            let messages = e2e.messages
            // Six packet ids, each sent four times: a full turn of the sequence and then some.
            let states = try await messages.wait(for: "states of 8 packet ids", count: 8, timeout: 30) {
                $0.topic == "gattway/bthome_th" && $0.number("packet_id") != nil
            }
            let ids = states.compactMap { $0.number("packet_id") }
            for (earlier, later) in zip(ids, ids.dropFirst()) {
                #expect(later != earlier, "a repeated frame was published again: packet ids \(ids)")
            }
            #expect(Set(ids).count >= 6, "\(ids)")
            // A health message sent after those states counts at least their reports.
            let health = try await messages.next(on: "gattway/bridge/health", after: messages.count, timeout: 30)
            let section = try #require(health.json?["radio"], "\(health.text)")
            #expect(section["path"] == .string(radio), "\(health.text)")
            #expect(section["adapter"] == .string("hci0"), "\(health.text)")
            if radio == "mgmt" {
                // Every report came through, repeats included: four per published packet id.
                guard case .number(let reports)? = section["reports"] else {
                    Issue.record("no report count: \(health.text)")
                    return
                }
                #expect(reports >= Double(ids.count * 3), "\(health.text)")
                guard case .number(let repeats)? = health.json?["dropped"]?["repeated_frame"] else {
                    Issue.record("no repeated_frame count: \(health.text)")
                    return
                }
                #expect(repeats >= Double(ids.count), "\(health.text)")
            }
        }
    }

    /// A BTHome sensor without a name, and a thermometer whose name ("Thermo-7") is only in its
    /// scan response (the simulator leaves names out of passive reports), with BTHome data too.
    static func sensorAndNamedThermometer() throws -> Scenario {
        try world(
            #"""
                    {"address": "A4:C1:38:00:00:04", "rssi": -60, "interval": "50ms", "connectable": false,
                     "service_data": {"FCD2": {"template": "bthome_v2", "fields": {
                       "packet_id": {"sequence": [1, 2, 3, 4, 5, 6, 7, 8]}, "temperature": 21.5}}}},
                    {"address": "A4:C1:38:00:00:07", "name": "Thermo-7", "rssi": -62, "interval": "50ms", "connectable": false,
                     "service_data": {"FCD2": {"template": "bthome_v2", "fields": {
                       "packet_id": {"sequence": [11, 12, 13, 14]}, "temperature": 19.0}}}}
            """#)
    }

    /// The thermometer's topic (its rule matches by name: the address is the topic level).
    static let thermoTopic = "gattway/A4C138000007"

    static func config(scanMode: String, radio: String = "mgmt") -> String {
        """
        {
          "mqtt": {"server": "$SERVER", "base_topic": "gattway", "client_id": "gattway-e2e"},
          "bluetooth": {"adapter": "hci0", "radio": "\(radio)", "scan_mode": "\(scanMode)"},
          "devices": [{"match": {"address": "A4:C1:38:00:00:04"}, "name": "bthome_th"},
                      {"match": {"name": "Thermo-*"}}]
        }
        """
    }

    @Test(
        "advertisement-only readings reach MQTT in every scan mode on the management path; passive starts no discovery and misses the name sent only in the scan response, auto finds it in an active window",
        arguments: ["active", "passive", "auto"])
    func readingsInEveryScanMode(scanMode: String) async throws {
        try await EndToEnd.run(
            config: Self.config(scanMode: scanMode), scenario: try Self.sensorAndNamedThermometer(),
            managementSocket: true
        ) { e2e in
            let messages = e2e.messages
            let states = try await messages.wait(for: "states of 4 packet ids", count: 4, timeout: 30) {
                $0.topic == "gattway/bthome_th" && $0.number("packet_id") != nil
            }
            #expect(states.allSatisfy { $0.number("temperature") == 21.5 })
            let discoveries = await e2e.simulator.counterValues().startDiscoveryCalls
            switch scanMode {
            case "passive":
                // The kernel's monitor scan only: bluetoothd never discovered, and the name the
                // thermometer sends only in its scan response never came (its rule matches nothing).
                #expect(discoveries == 0)
                #expect(!messages.all.contains { $0.topic == Self.thermoTopic })
                #expect(e2e.gateway.log().contains("scan mode: passive"))
            default:
                // Active throughout, or auto's window for the unheard name: the name came in a
                // scan response, and the thermometer's readings follow.
                #expect(discoveries >= 1)
                let thermo = try await messages.wait(for: "a thermo state", count: 1, timeout: 30) {
                    $0.topic == Self.thermoTopic && $0.number("temperature") == 19.0
                }
                #expect(!thermo.isEmpty)
            }
            if scanMode == "auto" {
                // Every name heard: passive again (the discovery stopped), and the thermometer,
                // its name kept by address, still publishes from passive reports.
                try await e2e.gateway.waitForOutput(containing: "passive again", timeout: 30)
                let after = messages.count
                let more = try await messages.wait(
                    for: "thermo states after the window", count: 2, after: after, timeout: 30
                ) { $0.topic == Self.thermoTopic }
                #expect(more.allSatisfy { $0.number("temperature") == 19.0 })
            }
        }
    }

    @Test(
        "scan_mode passive on bluetoothd's D-Bus view (no passive scan in BlueZ 5.66) stops the start with the reason")
    func passiveNeedsTheManagementPath() async throws {
        let daemon = try await DBusDaemon()
        defer { daemon.stop() }
        let loop = EventLoop(name: "e2e-passive")
        defer { loop.shutdown() }
        let simulator = try await BlueZSimulator.start(
            scenario: try Self.sensorAndNamedThermometer(), bus: .address(daemon.address), on: loop)
        let broker = try await MosquittoBroker()
        defer { broker.stop() }
        let configURL = daemon.directory.appendingPathComponent("config.json")
        try Self.config(scanMode: "passive", radio: "dbus").replacingOccurrences(of: "$SERVER", with: broker.url)
            .write(to: configURL, atomically: true, encoding: .utf8)
        let gateway = try ChildProcess(
            try BuiltProduct.path("gattway"), ["run", "--config", configURL.path], environment: daemon.environment)
        let status = try await within(60, "gattway run to refuse the start") { try await gateway.exited() }
        #expect(status != 0)
        #expect(gateway.log().contains("bluetooth.scan_mode is passive"), "\(gateway.log())")
        #expect(await simulator.counterValues().startDiscoveryCalls == 0)
        await simulator.stop()
    }
}
