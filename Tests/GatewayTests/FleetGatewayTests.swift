import Bluetooth
import GatewayFakes
import JSON
import Testing

@testable import Gateway

/// Fleet mode in a real ``Gateway`` on the manual clock (docs/fleet.md, "Commands"): this gateway
/// is `b`; the other gateway, `a`, is its fleet messages, handed to `b` as the broker would.
@Suite("Fleet in the gateway: commands for a device another gateway owns")
struct FleetGatewayTests {
    static let lamp = address("A4:C1:38:00:00:10")
    static let led = BLECharacteristic(
        service: BluetoothUUID(0xFFF0), uuid: BluetoothUUID(0xFFF1), properties: [.write, .writeWithoutResponse])
    static let command = #"{"brightness": 80, "transaction": "t1"}"#
    static let commandHash = FleetView.commandHash(topic: "gattway/lamp/set", payload: Array(command.utf8))

    static let config = """
        {"fleet": {"enabled": true, "gateway_id": "b", "handover_after": "2s", "lease": "15s"},
         "commands": {"ttl": "30s"},
         "devices": [{"match": {"address": "A4:C1:38:00:00:10"}, "name": "lamp",
                      "commands": {"brightness": {"characteristic": "FFF1", "encoding": "u8", "maximum": 100}}}]}
        """

    /// A gateway whose lamp answers writes, started.
    func harness() async throws -> Harness {
        let harness = try Harness(Self.config)
        harness.ble.add(Self.lamp, .init(characteristics: [Self.led]))
        try await harness.start()
        return harness
    }

    /// Gateway a's fleet message: it hears the lamp at -80 dBm and owns it, or (`owner` false)
    /// lets it go, listing the commands it ran.
    func fromA(_ harness: Harness, owner: Bool = true, ran: [UInt64] = []) async {
        let message = FleetView.Message(
            gateway: "a", online: true,
            sightings: [
                FleetView.Sighting(
                    address: Self.lamp.rawValue, rssi: -80, claim: owner ? .owner : .none, key: nil, ran: ran)
            ])
        await harness.gateway.handle(
            MQTTInboundMessage(topic: "gattway/fleet/a", payload: FleetMessageCodec.encode(message)))
        await harness.settle()
    }

    /// One second: b hears the lamp at -60 dBm, a says it owns it, the clock moves on.
    func second(_ harness: Harness) async {
        await harness.gateway.handle(BLEDiscovery(address: Self.lamp, advertisement: AdvertisementData(rssi: -60)))
        await fromA(harness)
        await harness.advance(1)
    }

    /// What b's last fleet message says of the lamp.
    func claim(_ harness: Harness) -> FleetView.Claim? {
        guard let last = harness.mqtt.messages(on: "gattway/fleet/b").last,
            let message = try? FleetMessageCodec.decode(last.payload)
        else { return nil }
        return message.sightings.first { $0.address == Self.lamp.rawValue }?.claim
    }

    /// b hears the lamp better than its owner a by more than the hysteresis: after the first
    /// lease and `handover_after` it claims the lamp (a has not let go yet).
    func claiming() async throws -> Harness {
        let harness = try await harness()
        for _ in 0..<40 where claim(harness) != .claiming { await second(harness) }
        #expect(claim(harness) == .claiming)
        return harness
    }

    func responses(_ harness: Harness) -> [JSONValue] {
        harness.mqtt.messages(on: "gattway/lamp/response").compactMap { json($0.payloadText) }
    }

    func events(_ harness: Harness) -> [JSONValue] {
        harness.mqtt.messages(on: "gattway/bridge/b/event").compactMap { json($0.payloadText)?["type"] }
    }

    @Test(
        "a command for a device another gateway owns is neither run nor answered here; counted as dropped.other_owner")
    func otherOwner() async throws {
        let harness = try await harness()
        for _ in 0..<3 { await second(harness) }
        await harness.command("gattway/lamp/set", Self.command, responseTopic: "gattway/lamp/response")
        #expect(responses(harness).isEmpty)
        #expect(harness.ble.writes.isEmpty && harness.ble.connectAttempts.isEmpty)
        #expect(await harness.gateway.healthPayload["dropped"]?["other_owner"] == .number(1))
    }

    @Test(
        "a command that arrives while this gateway claims the device is held, and runs once the owner lets go without having run it"
    )
    func heldThenRun() async throws {
        let harness = try await claiming()
        await harness.command("gattway/lamp/set", Self.command, responseTopic: "gattway/lamp/response")
        // Held: not run, not answered, not dropped — the owner may still run it.
        #expect(responses(harness).isEmpty && harness.ble.writes.isEmpty)
        #expect(await harness.gateway.healthPayload["dropped"]?["other_owner"] == .number(0))
        // a lets go; its release does not list the command: b owns the lamp and runs it, once.
        await fromA(harness, owner: false)
        #expect(claim(harness) == .owner)
        #expect(events(harness).contains(.string("device_owned")))
        #expect(responses(harness).map { $0["status"] } == [.string("ok")])
        #expect(responses(harness).first?["transaction"] == .string("t1"))
        #expect(
            harness.ble.writes == ["write-begin A4:C1:38:00:00:10 FFF1 80", "write-end A4:C1:38:00:00:10 FFF1 request"])
        // b's next message lists it as run (a gateway taking the lamp over next does not run it
        // again), and nothing runs twice.
        await harness.advance(3)
        let announced = harness.mqtt.messages(on: "gattway/fleet/b").last.flatMap {
            try? FleetMessageCodec.decode($0.payload)
        }
        #expect(announced?.sightings.first { $0.address == Self.lamp.rawValue }?.ran == [Self.commandHash])
        #expect(responses(harness).count == 1 && harness.ble.writes.count == 2)
    }

    @Test("a held command the owner ran before it let go is dropped at the handover: run once in the fleet")
    func heldThenDropped() async throws {
        let harness = try await claiming()
        await harness.command("gattway/lamp/set", Self.command, responseTopic: "gattway/lamp/response")
        await fromA(harness, owner: false, ran: [Self.commandHash])
        #expect(claim(harness) == .owner)
        #expect(events(harness).contains(.string("device_owned")))
        await harness.advance(1)
        #expect(responses(harness).isEmpty)
        #expect(harness.ble.writes.isEmpty && harness.ble.connectAttempts.isEmpty)
        // A command that arrives now, while b owns the lamp, runs here.
        await harness.command(
            "gattway/lamp/set", #"{"brightness": 20}"#, responseTopic: "gattway/lamp/response")
        #expect(responses(harness).map { $0["status"] } == [.string("ok")])
    }
}
