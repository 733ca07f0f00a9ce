import Bluetooth
import GatewayFakes
import JSON
import Testing

@testable import Gateway

/// Presence in a fleet (docs/fleet.md, "Presence") in a real ``Gateway`` on the manual clock:
/// this gateway is `b` in the hall; the other gateway, `a`, is its fleet messages, handed to `b`
/// as the broker would. Only the gateway that owns an identity publishes `<base>/presence/<name>`.
@Suite("Fleet in the gateway: presence published by the gateway that hears the identity best")
struct FleetPresenceTests {
    static let keys = address("C4:7C:8D:6A:3E:21")
    static let key = FleetView.identityKey("keys")
    static let topic = "gattway/presence/keys"

    static let config = #"""
        {"fleet": {"enabled": true, "gateway_id": "b", "handover_after": "2s", "lease": "15s"},
         "presence": {"room": "hall", "away_after": "30s",
                      "identities": [{"name": "keys", "address": "C4:7C:8D:6A:3E:21"}]}}
        """#

    /// Gateway a's message: it hears the keys at `rssi` and owns them (or `owner` false: lets go).
    func fromA(_ harness: Harness, rssi: Double = -60, owner: Bool = true) async {
        let message = FleetView.Message(
            gateway: "a", online: true,
            sightings: [FleetView.Sighting(address: Self.key, rssi: rssi, claim: owner ? .owner : .none, key: nil)])
        await harness.gateway.handle(
            MQTTInboundMessage(topic: "gattway/fleet/a", payload: FleetMessageCodec.encode(message)))
        await harness.settle()
    }

    /// One second: b hears the keys at `rssi`, a says what it says, the clock moves on.
    func second(_ harness: Harness, rssi: Int16, a: (rssi: Double, owner: Bool)? = (-60, true)) async {
        harness.ble.advertise(BLEDiscovery(address: Self.keys, advertisement: AdvertisementData(rssi: rssi)))
        await harness.settle()
        if let a { await fromA(harness, rssi: a.rssi, owner: a.owner) }
        await harness.advance(1)
    }

    /// What b's last fleet message says of the keys.
    func claim(_ harness: Harness) -> FleetView.Claim? {
        guard let last = harness.mqtt.messages(on: "gattway/fleet/b").last,
            let message = try? FleetMessageCodec.decode(last.payload)
        else { return nil }
        return message.sightings.first { $0.address == Self.key }?.claim
    }

    @Test("another gateway hears the identity better: nothing here; it goes away: published here with this room")
    func quietThenTakeOver() async throws {
        let harness = try Harness(Self.config)
        try await harness.start()
        for _ in 0..<40 { await second(harness, rssi: -80) }
        #expect(harness.mqtt.messages(on: Self.topic).isEmpty, "a owns the keys: b stays quiet")
        // b announces the identity it hears (not its name): under "identities".
        let last = try #require(harness.mqtt.messages(on: "gattway/fleet/b").last)
        #expect(last.payloadText.contains(#""identities":[[""#), "\(last.payloadText)")
        #expect(!last.payloadText.contains("keys"), "\(last.payloadText)")
        #expect(claim(harness) == FleetView.Claim.none)

        // a stops (its orderly stop): b owns the keys and publishes them, home, in the hall.
        let offline = FleetView.Message(gateway: "a", online: false, sightings: [])
        await harness.gateway.handle(
            MQTTInboundMessage(topic: "gattway/fleet/a", payload: FleetMessageCodec.encode(offline)))
        for _ in 0..<3 { await second(harness, rssi: -80, a: nil) }
        #expect(claim(harness) == .owner)
        let payload = try #require(harness.mqtt.messages(on: Self.topic).last.flatMap { json($0.payloadText) })
        #expect(payload["state"] == .string("home") && payload["room"] == .string("hall"))
    }

    @Test("hearing the identity better by the hysteresis for handover_after: claimed, published once released")
    func handover() async throws {
        let harness = try Harness(Self.config)
        try await harness.start()
        for _ in 0..<40 where claim(harness) != .claiming { await second(harness, rssi: -50, a: (-80, true)) }
        #expect(claim(harness) == .claiming)
        #expect(harness.mqtt.messages(on: Self.topic).isEmpty, "claiming is not owning: still quiet")
        // a lets go (its release): b owns the keys at once and publishes them.
        await second(harness, rssi: -50, a: (-80, false))
        #expect(claim(harness) == .owner)
        let payload = try #require(harness.mqtt.messages(on: Self.topic).last.flatMap { json($0.payloadText) })
        #expect(payload["room"] == .string("hall"))
        // Later a claims it back (it hears it better now): b lets go and stays quiet.
        let count = harness.mqtt.messages(on: Self.topic).count
        let claimA = FleetView.Message(
            gateway: "a", online: true,
            sightings: [FleetView.Sighting(address: Self.key, rssi: -40, claim: .claiming, key: nil)])
        await harness.gateway.handle(
            MQTTInboundMessage(topic: "gattway/fleet/a", payload: FleetMessageCodec.encode(claimA)))
        await harness.settle()
        #expect(claim(harness) == FleetView.Claim.none)
        await harness.advance(40)  // away_after passes: the not_home is a's to publish, not b's
        #expect(harness.mqtt.messages(on: Self.topic).count == count)
    }

    @Test("identities in the fleet message: round trip, devices first; a key without the top bit is refused")
    func codec() throws {
        let message = FleetView.Message(
            gateway: "pi-hall", online: true,
            sightings: [
                FleetView.Sighting(address: 0xA4C1_3800_0004, rssi: -67, claim: .owner, key: 7),
                FleetView.Sighting(address: Self.key, rssi: -71, claim: .claiming, key: nil),
                FleetView.Sighting(address: FleetView.identityKey("phone"), rssi: nil, claim: .owner, key: nil),
            ])
        let bytes = FleetMessageCodec.encode(message)
        #expect(try FleetMessageCodec.decode(bytes) == message, "\(String(decoding: bytes, as: UTF8.self))")
        let identitiesFirst = #"""
            {"gateway":"a","state":"online","identities":[["\#(String(Self.key, radix: 16))",-70,1]],
             "devices":[["a4c138000004",-60,0,null]]}
            """#
        let decoded = try FleetMessageCodec.decode(Array(identitiesFirst.utf8))
        #expect(decoded.sightings.map(\.address) == [0xA4C1_3800_0004, Self.key])
        #expect(throws: FleetMessageCodec.Invalid.self) {
            try FleetMessageCodec.decode(
                Array(#"{"gateway":"a","state":"online","devices":[],"identities":[["00a4c13800000400",-70,1]]}"#.utf8))
        }
        #expect(throws: FleetMessageCodec.Invalid.self) {
            try FleetMessageCodec.decode(
                Array(#"{"gateway":"a","state":"online","devices":[],"identities":[["8000000000000001",-70,3]]}"#.utf8))
        }
        #expect(FleetView.isIdentity(FleetView.identityKey("x")) && !FleetView.isIdentity(0xFFFF_FFFF_FFFF))
    }
}
