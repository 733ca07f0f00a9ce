import BlueZSimulator
import Bluetooth
import Foundation
import TestSupport
import Testing

/// Presence through `gattway run`: a simulated phone rotates its resolvable private address every
/// 2 s; the gateway resolves each address with the phone's IRK and publishes one presence topic,
/// never a device; a phone of another IRK publishes nothing under presence; the phone leaving is
/// `not_home` after `away_after`.
@Suite("End to end: presence by IRK across address rotations")
struct PresenceEndToEndTests {
    static let irk = "ec0234a357c8ad05341010a60a397d9b"
    static let strangerIRK = "0102030405060708090a0b0c0d0e0f10"
    static let scenario = """
        {
          "seed": 1,
          "adapters": [{ "name": "hci0", "address": "00:AA:01:00:00:00", "alias": "gattway-presence" }],
          "devices": [
            { "irk": "\(irk)", "rpa_rotation": "2s", "name": "Phone", "rssi": -71, "rssi_jitter": 3,
              "interval": "100ms", "manufacturer_data": { "0x004C": { "hex": "1005011844332211" } } },
            { "irk": "\(strangerIRK)", "rpa_rotation": "15m", "rssi": -60, "rssi_jitter": 3,
              "interval": "100ms", "manufacturer_data": { "0x004C": { "hex": "1005011844332299" } } }
          ]
        }
        """
    static let config = """
        {"mqtt": {"server": "$SERVER", "base_topic": "gattway"}, "homeassistant": {"enabled": false},
         "presence": {"room": "office", "away_after": "4s", "rssi_at_1m": -59,
                      "identities": [{"name": "phone", "irk": "\(irk)"}]},
         "devices": [{"match": {"manufacturer_id": 76}}]}
        """

    static func phoneAddress(_ index: UInt32) -> BluetoothAddress {
        DeviceSpec.resolvablePrivateAddress(irk: hexBytes(irk), index: index)!
    }

    static func hexBytes(_ text: String) -> [UInt8] {
        stride(from: 0, to: text.count, by: 2).map { offset in
            let start = text.index(text.startIndex, offsetBy: offset)
            return UInt8(text[start..<text.index(start, offsetBy: 2)], radix: 16)!
        }
    }

    @Test("one presence topic across two rotations with distance and room; no device per rotation; not_home when gone")
    func rotations() async throws {
        let scenario = try Scenario.parse(Data(Self.scenario.utf8))
        try await EndToEnd.run(config: Self.config, scenario: scenario) { e2e in
            let messages = e2e.messages
            let topic = "gattway/presence/phone"
            let first = try await messages.next(on: topic, timeout: 20) { $0.string("state") == "home" }
            #expect(first.string("room") == "office", "\(first.text)")
            let distance = try #require(first.number("distance"), "\(first.text)")
            #expect(distance > 0.5 && distance < 10, "−71 ± 3 dBm at −59 dBm/1 m, exponent 3: about 2.5 m")

            // Two rotations later the same topic still updates.
            let second = Self.phoneAddress(2)
            let simulator = e2e.simulator
            try await eventually("two rotations of the phone's address", within: 20) {
                await simulator.deviceAddresses.contains(second)
            }
            let mark = messages.count
            let later = try await messages.next(on: topic, after: mark, timeout: 10) { $0.string("state") == "home" }
            #expect(later.string("room") == "office" && later.number("distance") != nil, "\(later.text)")

            // Nothing under presence for the stranger; bridge/devices has the stranger, none of the phone's addresses.
            #expect(messages.all.allSatisfy { !$0.topic.hasPrefix("gattway/presence/") || $0.topic == topic })
            let phoneAddresses = (0..<8).map { Self.phoneAddress($0).description }
            let devices = try await e2e.retained("gattway/bridge/devices", count: 1)
            let listed = String(decoding: devices.last?.payload ?? [], as: UTF8.self)
            #expect(listed.contains("\"address\""), "the stranger is a device: \(listed)")
            #expect(phoneAddresses.allSatisfy { !listed.contains($0) }, "\(listed)")
            #expect(
                !messages.all.contains { message in phoneAddresses.contains { message.text.contains($0) } },
                "no message names an address of the phone")

            // The phone leaves: not_home after away_after, with no report to trigger it.
            let leaving = messages.count
            for address in await e2e.simulator.deviceAddresses where phoneAddresses.contains(address.description) {
                try await e2e.simulator.removeDevice(address: address.description)
            }
            let gone = try await messages.next(on: topic, after: leaving, timeout: 15) {
                $0.string("state") == "not_home"
            }
            #expect(gone.string("room") == "office", "\(gone.text)")
        }
    }

    /// The same world with `presence.espresense`: the phone is also published as an ESPresense node
    /// publishes it, under ESPresense's id for an IRK, in the gateway's room.
    @Test("ESPresense: espresense/devices/irk:<irk>/office across rotations; nothing for the stranger's IRK")
    func espresense() async throws {
        let scenario = try Scenario.parse(Data(Self.scenario.utf8))
        let config = Self.config.replacingOccurrences(
            of: #""room": "office","#, with: #""room": "office", "espresense": {"enabled": true},"#)
        try await EndToEnd.run(config: config, scenario: scenario) { e2e in
            let messages = e2e.messages
            let topic = "espresense/devices/irk:\(Self.irk)/office"
            let first = try await messages.next(on: topic, timeout: 20) { $0.number("distance") != nil }
            #expect(first.string("id") == "irk:\(Self.irk)" && first.string("name") == "phone", "\(first.text)")
            let distance = try #require(first.number("distance"), "\(first.text)")
            #expect(distance > 0.5 && distance < 10, "−71 ± 3 dBm at −59 dBm/1 m, exponent 3: about 2.5 m")
            #expect(first.number("rssi@1m") == -59 && first.number("rssi") != nil, "\(first.text)")

            // After two rotations: the same topic and id, from a later address of the phone.
            let simulator = e2e.simulator
            try await eventually("two rotations of the phone's address", within: 20) {
                await simulator.deviceAddresses.contains(Self.phoneAddress(2))
            }
            func mac(_ address: BluetoothAddress) -> String {
                address.description.replacingOccurrences(of: ":", with: "").lowercased()
            }
            let phoneMacs = (0..<16).map { mac(Self.phoneAddress($0)) }
            let firstMac = try #require(first.string("mac"), "\(first.text)")
            #expect(phoneMacs.contains(firstMac), "an address of the phone: \(first.text)")
            let later = try await messages.next(on: topic, after: messages.count, timeout: 10) {
                $0.string("mac") != nil && $0.string("mac") != firstMac
            }
            #expect(phoneMacs.contains(later.string("mac") ?? ""), "another address of the phone: \(later.text)")
            #expect(later.string("id") == "irk:\(Self.irk)" && later.number("distance") != nil, "\(later.text)")

            // One ESPresense topic only: the stranger's IRK is unknown, so nothing of it.
            let topics = Set(messages.all.map(\.topic).filter { $0.hasPrefix("espresense/") })
            #expect(topics == [topic], "\(topics)")
            #expect(
                !messages.all.contains { $0.topic.contains(Self.strangerIRK) || $0.text.contains(Self.strangerIRK) })
        }
    }
}
