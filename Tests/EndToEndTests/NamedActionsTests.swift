import BlueZSimulator
import Foundation
import MQTT
import TestSupport
import Testing

/// Named device actions (`model` on a device rule) from MQTT through `gattway run` to simulated
/// devices: the bytes the simulator records on the device's characteristic are the device's
/// own layout, and each command is answered like every other.
@Suite("End to end: named device actions")
struct NamedActionsEndToEndTests {
    static let clock = "A4:C1:38:00:00:20"
    static let bot = "A4:C1:38:00:00:21"
    static let clockCharacteristic = "EBE0CCB7-7A0A-4B0C-8A1A-6FF2997DA3A6"

    static let scenario = """
        {"adapters": [{"name": "hci0", "address": "00:AA:01:00:00:00"}],
         "timing": {"disconnect_delay": "50ms", "resolve_delay": "10ms", "gatt_latency": 0},
         "devices": [
           {"address": "\(clock)", "name": "LYWSD02", "interval": "100ms",
            "gatt": [{"uuid": "EBE0CCB0-7A0A-4B0C-8A1A-6FF2997DA3A6", "characteristics": [
              {"uuid": "\(clockCharacteristic)", "flags": ["read", "write", "write-without-response"]}]}]},
           {"address": "\(bot)", "name": "WoHand", "interval": "100ms",
            "gatt": [{"uuid": "CBA20D00-224D-11E6-9FB8-0002A5D5C51B", "characteristics": [
              {"uuid": "CBA20002-224D-11E6-9FB8-0002A5D5C51B", "flags": ["write", "write-without-response"]}]}]}
         ]}
        """

    static let config = """
        {"mqtt": {"server": "$SERVER", "base_topic": "gattway"},
         "bluetooth": {"adapter": "hci0", "connect_timeout": "5s", "gatt_timeout": "3s"},
         "homeassistant": {"enabled": true},
         "devices": [{"match": {"address": "\(clock)"}, "name": "clock", "model": "LYWSD02"},
                     {"match": {"address": "\(bot)"}, "name": "bot", "model": "SwitchBot Bot"}]}
        """

    /// The simulator's recorded writes to `uuid` of `device`.
    static func writes(_ e2e: EndToEnd, _ device: String, _ uuid: String) async -> [RecordedWrite] {
        await e2e.simulator.recordedWrites.filter {
            $0.device.description == device && $0.uuid.description.uppercased() == uuid
        }
    }

    @Test(
        "LYWSD02 set_time byte for byte: a fixed timestamp and tz_offset, then {} with the gateway's clock and its TZ offset (+03); SwitchBot Bot press; each answered ok, a bad payload answered error and not written"
    )
    func setTime() async throws {
        let scenario = try Scenario.parse(Data(Self.scenario.utf8))
        // The gateway's local zone: three hours east of UTC, no daylight saving time.
        try await EndToEnd.run(config: Self.config, scenario: scenario, environment: ["TZ": "<+03>-3"]) { e2e in
            let messages = e2e.messages
            // Both devices seen: their actions are announced to Home Assistant as buttons.
            let button = try await messages.next(on: "homeassistant/button/gattway_A4C138000020/set_time/config")
            #expect(button.string("command_topic") == "gattway/clock/set/set_time", "\(button.text)")
            #expect(button.string("payload_press") == "{}", "\(button.text)")
            try await messages.next(on: "homeassistant/button/gattway_A4C138000021/press/config")

            // 1673113293 = 2023-01-07T17:41:33Z = 0x63B9AECD; -3 h is 0xFD.
            var mark = messages.count
            try await e2e.send("gattway/clock/set/set_time", #"{"timestamp": 1673113293, "tz_offset": -3}"#)
            var response = try await messages.next(on: "gattway/clock/response", after: mark)
            #expect(response.string("status") == "ok", "\(response.text)")
            var writes = await Self.writes(e2e, Self.clock, Self.clockCharacteristic)
            #expect(writes.map(\.value) == [[0xCD, 0xAE, 0xB9, 0x63, 0xFD]], "\(writes)")
            #expect(writes.first?.type == "command", "the clock takes a write without response")

            // {}: now on the gateway's clock, its offset from TZ.
            mark = messages.count
            let before = UInt32(Date().timeIntervalSince1970.rounded(.down))
            try await e2e.send("gattway/clock/set", #"{"set_time": {}, "transaction": "now"}"#)
            response = try await messages.next(on: "gattway/clock/response", after: mark) {
                $0.string("transaction") == "now"
            }
            let after = UInt32(Date().timeIntervalSince1970.rounded(.up))
            #expect(response.string("status") == "ok", "\(response.text)")
            writes = await Self.writes(e2e, Self.clock, Self.clockCharacteristic)
            let written = try #require(writes.count == 2 ? writes[1].value : nil, "\(writes)")
            #expect(written.count == 5 && written[4] == 3, "\(written)")
            let seconds = written.prefix(4).reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            #expect(seconds >= before && seconds <= after, "\(seconds) not in \(before)…\(after)")

            // A payload the template refuses: an error answer naming the field, nothing written.
            mark = messages.count
            try await e2e.send("gattway/clock/set/set_time", #"{"tz_offset": "Europe/Paris"}"#)
            response = try await messages.next(on: "gattway/clock/response", after: mark)
            #expect(response.string("status") == "error", "\(response.text)")
            #expect(
                response.string("error")?.hasPrefix("set_time: tz_offset: expected hours") == true, "\(response.text)")
            #expect(await Self.writes(e2e, Self.clock, Self.clockCharacteristic).count == 2)

            // The Bot's press, as Home Assistant's button sends it.
            mark = messages.count
            try await e2e.send("gattway/bot/set/press", "{}")
            response = try await messages.next(on: "gattway/bot/response", after: mark)
            #expect(response.string("status") == "ok", "\(response.text)")
            let press = await Self.writes(e2e, Self.bot, "CBA20002-224D-11E6-9FB8-0002A5D5C51B")
            #expect(press.map(\.value) == [[0x57, 0x01, 0x00]], "\(press)")
            #expect(press.first?.type == "request")
        }
    }
}
