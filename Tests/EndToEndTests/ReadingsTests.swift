import Foundation
import JSON
import MQTT
import TestSupport
import Testing

/// Readings of the demo scenario through `gattway run` to MQTT, as a user sees them.
@Suite("End to end: readings on MQTT")
struct ReadingsTests {
    @Test(
        "notifications and advertisements arrive on gattway/<name> with the values the scenario generates, retained, with units in discovery"
    )
    func readings() async throws {
        try await EndToEnd.run(config: DemoWorldConfig.text) { e2e in
            let messages = e2e.messages
            // Battery sensor: 2A19 notifications count down by one from 99 (scenario counter).
            let battery = try await messages.wait(for: "three battery readings", count: 3) {
                $0.topic == "gattway/battery_sensor" && $0.number("battery") != nil
            }
            let levels = battery.compactMap { $0.number("battery") }
            #expect(levels.allSatisfy { (5...100).contains($0) }, "\(levels)")
            for (earlier, later) in zip(levels, levels.dropFirst()) where later != earlier {
                #expect(later == earlier - 1, "battery levels \(levels) do not follow the scenario's counter")
            }
            // Environmental sensor: 2A6E temperature (0.01 °C) and 2A6F humidity (0.01 %) notifications.
            let environment = try await messages.next(on: "gattway/env_sensor") {
                $0.number("temperature") != nil && $0.number("humidity") != nil
            }
            #expect((20.5...23.5).contains(environment.number("temperature") ?? 0), "\(environment.text)")
            #expect((40...55).contains(environment.number("humidity") ?? 0), "\(environment.text)")
            // BTHome v2 advertisement (service data FCD2).
            let bthome = try await messages.next(on: "gattway/bthome_th") { $0.number("temperature") != nil }
            #expect((19...22).contains(bthome.number("temperature") ?? 0), "\(bthome.text)")
            #expect((40...60).contains(bthome.number("humidity") ?? 0), "\(bthome.text)")
            #expect(bthome.number("battery") == 93, "\(bthome.text)")
            // Ruuvi RAWv2 advertisement (manufacturer data 0x0499).
            let ruuvi = try await messages.next(on: "gattway/ruuvi") { $0.number("pressure") != nil }
            #expect((4...6).contains(ruuvi.number("temperature") ?? 0), "\(ruuvi.text)")
            #expect((70...80).contains(ruuvi.number("humidity") ?? 0), "\(ruuvi.text)")
            #expect(ruuvi.number("pressure") == 1008.5, "\(ruuvi.text)")

            // Every state carries rssi (scenario mean ± jitter), linkquality from it, and last_seen in ISO 8601 UTC.
            for (state, rssi, jitter) in [
                (battery.last, -58.0, 3.0), (environment, -64, 4), (bthome, -66, 3), (ruuvi, -72, 4),
            ] {
                let text = state?.text ?? ""
                let reported = state?.number("rssi") ?? 0
                #expect(abs(reported - rssi) <= jitter + 1, "\(text)")
                let expectedQuality = min(255, max(0, ((reported + 100) * 255 / 70).rounded(.down)))
                #expect(abs((state?.number("linkquality") ?? -1) - expectedQuality) <= 1, "\(text)")
                let lastSeen = state?.string("last_seen") ?? ""
                #expect(lastSeen.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/) != nil, "\(text)")
            }

            // Units: Home Assistant discovery configs name the unit of each sensor attribute.
            let units = try await Self.units(
                messages,
                [
                    ("bthome_th", "temperature", "°C"), ("bthome_th", "humidity", "%"), ("bthome_th", "battery", "%"),
                    ("ruuvi", "pressure", "hPa"), ("env_sensor", "temperature", "°C"),
                    ("battery_sensor", "battery", "%"),
                ])
            for (device, attribute, unit, found) in units {
                #expect(found == unit, "\(device).\(attribute): unit \(found ?? "none"), expected \(unit)")
            }

            // Availability: connected devices follow their link, advertisers their adverts.
            for device in ["battery_sensor", "env_sensor", "lamp", "bthome_th", "ruuvi"] {
                try await messages.next(on: "gattway/\(device)/availability") { $0.text == #"{"state":"online"}"# }
            }
            #expect(
                messages.all.allSatisfy {
                    !$0.topic.contains("A4C138000006") && !$0.text.contains("A4:C1:38:00:00:06")
                },
                "the heart-rate strap matches no rule and must not be reported")

            // What a client connecting later sees: retained states (mqtt.retain), availability and bridge state.
            let late = try await e2e.retained("gattway/ruuvi", count: 1)
            #expect(late.first?.retain == true)
            #expect(((try? JSONValue.parse(late.first?.payload ?? []))?["pressure"]) == .number(1008.5))
            let availability = try await e2e.retained("gattway/+/availability", count: 5)
            #expect(availability.allSatisfy { $0.retain && $0.payloadString == #"{"state":"online"}"# })
            let bridge = try await e2e.retained("gattway/bridge/state", count: 1)
            #expect(bridge.first?.retain == true && bridge.first?.payloadString == #"{"state":"online"}"#)
        }
    }

    /// The `unit_of_measurement` of each (device, attribute) from the retained Home Assistant
    /// discovery configs whose state topic is the device's and whose template reads the attribute.
    static func units(_ messages: MessageRecorder, _ wanted: [(String, String, String)]) async throws
        -> [(String, String, String, String?)]
    {
        var result: [(String, String, String, String?)] = []
        for (device, attribute, unit) in wanted {
            let config = try await messages.wait(for: "a discovery config of \(device).\(attribute)") { message in
                message.topic.hasPrefix("homeassistant/") && message.string("state_topic") == "gattway/\(device)"
                    && (message.string("value_template") ?? "").contains("value_json.\(attribute) ")
            }
            result.append((device, attribute, unit, config.last?.string("unit_of_measurement")))
        }
        return result
    }

    @Test("with the repo's config.json (scan 180F) the heart-rate-only device is never reported")
    func serviceFilter() async throws {
        try await Self.serviceFilter(unfilteredScanner: false)
    }

    @Test("the same while another BlueZ client scans unfiltered (BlueZ then reports every device to every client)")
    func serviceFilterUnderUnfilteredScan() async throws {
        // The second client's StartDiscovery races the gateway's: when it wins, BlueZ creates
        // the devices before the gateway scans and, the merged scan being unfiltered, signals
        // nothing more for a device whose RSSI and data stay put (the battery sensor). The
        // central reports such already-seen devices when a scan starts (BlueZTests
        // ScanningTests.devicesKnownBeforeTheScan covers it deterministically).
        try await Self.serviceFilter(unfilteredScanner: true)
    }

    static func serviceFilter(unfilteredScanner: Bool, timeout: Double = 20) async throws {
        // The repository's config.json, pointed at the test broker, plus a catch-all rule: only
        // the scan filter (enforced by the gateway itself) keeps the other devices out.
        let repoConfig = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("config.json")
        var config = try JSONValue.parse(Array(try Data(contentsOf: repoConfig)))
        config = config.replacing(["mqtt", "server"], with: .string("$SERVER"))
        guard case .array(var rules)? = config["devices"] else {
            Issue.record("config.json has no devices list")
            return
        }
        rules.append(.object([("match", .object([]))]))
        config = config.replacing(["devices"], with: .array(rules))
        try await EndToEnd.run(config: config.serialized) { e2e in
            // Closed with the event loop when the world stops.
            if unfilteredScanner { _ = try await e2e.startUnfilteredScan() }
            let messages = e2e.messages
            // The three 180F devices: the battery sensor notifies; the env sensor and the lamp
            // have a read-only 2A19 (read once on connect: 87 and 100 in the scenario).
            let battery = try await messages.next(on: "gattway/A4C138000001", timeout: timeout) {
                $0.number("battery") != nil
            }
            #expect((5...100).contains(battery.number("battery") ?? 0))
            let environment = try await messages.next(on: "gattway/A4C138000002", timeout: timeout) {
                $0.number("battery") != nil
            }
            #expect(environment.number("battery") == 87)
            let lamp = try await messages.next(on: "gattway/A4C138000003", timeout: timeout) {
                $0.number("battery") != nil
            }
            #expect(lamp.number("battery") == 100)
            // Keep watching while the unfiltered scan makes BlueZ report everything: ten more
            // battery notifications (2 s of the scenario) without the other devices showing up.
            let mark = messages.count
            try await messages.wait(for: "ten more battery notifications", count: 10, after: mark) {
                $0.topic == "gattway/A4C138000001" && $0.number("battery") != nil
            }
            let counters = await e2e.simulator.currentCounters
            #expect(counters.advertisementReports > 50)
            for message in messages.all {
                for other in [
                    "A4C138000006", "A4:C1:38:00:00:06", "A4C138000004", "A4:C1:38:00:00:04", "C4D38C124A5F",
                    "C4:D3:8C:12:4A:5F",
                ] {
                    #expect(
                        !message.topic.contains(other) && !message.text.contains(other),
                        "\(message.topic) \(message.text)")
                }
            }
            let devices = messages.messages(on: "gattway/bridge/devices").last?.text ?? ""
            for address in ["A4:C1:38:00:00:01", "A4:C1:38:00:00:02", "A4:C1:38:00:00:03"] {
                #expect(devices.contains(address), "\(devices)")
            }
        }
    }
}
