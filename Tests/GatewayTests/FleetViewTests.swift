import Testing

@testable import Gateway

/// The fleet's ownership rules (docs/fleet.md), on ``FleetView`` alone: several views, one per
/// gateway, exchange their messages by hand, with a clock in seconds.
@Suite("Fleet ownership")
struct FleetViewTests {
    static let device: UInt64 = 0xA4C1_3800_0004

    static func view(_ me: String, lease: Double = 15, hysteresis: Double = 6, handoverAfter: Double = 30)
        -> FleetView
    {
        FleetView(
            settings: FleetView.Settings(me: me, hysteresis: hysteresis, handoverAfter: handoverAfter, lease: lease),
            now: 0)
    }

    /// A tiny fleet: every view hears the device at its own RSSI each second, messages are
    /// exchanged every second, and every view re-decides.
    struct Fleet {
        var views: [FleetView]
        var rssi: [Int?]
        var now = 0.0
        var alive: [Bool]

        init(_ names: [String], rssi: [Int?], lease: Double = 15) {
            views = names.map { FleetViewTests.view($0, lease: lease) }
            self.rssi = rssi
            alive = names.map { _ in true }
        }

        mutating func step(_ seconds: Int = 1) {
            for _ in 0..<seconds {
                now += 1
                for index in views.indices where alive[index] {
                    if let value = rssi[index] { views[index].heard(FleetViewTests.device, rssi: value, now: now) }
                }
                let messages = views.indices.filter { alive[$0] }.map { views[$0].message(now: now) }
                for index in views.indices where alive[index] {
                    for message in messages { views[index].received(message, now: now) }
                    _ = views[index].evaluate(now: now)
                }
            }
        }

        var owners: [Int] {
            views.indices.filter { alive[$0] && views[$0].role(FleetViewTests.device) == .owner }
        }
    }

    @Test("nobody owns a device during the first lease; then the gateway that hears it best, alone")
    func firstOwner() {
        var fleet = Fleet(["a", "b", "c"], rssi: [-80, -60, -70])
        fleet.step(10)
        #expect(fleet.owners.isEmpty)
        fleet.step(8)
        #expect(fleet.owners == [1])
        fleet.step(60)
        #expect(fleet.owners == [1])
    }

    @Test("equal RSSIs: the smaller gateway id owns it")
    func tieBreak() {
        var fleet = Fleet(["b", "a"], rssi: [-70, -70])
        fleet.step(20)
        #expect(fleet.owners == [1])
    }

    @Test("jitter of ±4 dB around the owner's level does not move the device (hysteresis 6 dB)")
    func noFlapping() {
        var fleet = Fleet(["a", "b"], rssi: [-70, -72])
        fleet.step(20)
        #expect(fleet.owners == [0])
        var gained = 0
        for second in 0..<300 {
            fleet.rssi[1] = -70 + (second % 2 == 0 ? 4 : -4)
            fleet.rssi[0] = -70 + (second % 3 == 0 ? -4 : 4)
            let before = fleet.owners
            fleet.step()
            if fleet.owners != before { gained += 1 }
        }
        #expect(gained == 0)
        #expect(fleet.owners == [0])
    }

    @Test("a gateway better by the hysteresis for handover_after takes over, once, never two owners at a time")
    func handover() {
        var fleet = Fleet(["a", "b"], rssi: [-60, -75])
        fleet.step(20)
        #expect(fleet.owners == [0])
        fleet.rssi = [-80, -60]  // the device moved next to b
        var doubleOwners = 0
        var changes = 0
        var owner = fleet.owners
        for _ in 0..<90 {
            fleet.step()
            if fleet.owners.count > 1 { doubleOwners += 1 }
            if fleet.owners != owner, !fleet.owners.isEmpty {
                changes += 1
                owner = fleet.owners
            }
        }
        #expect(fleet.owners == [1])
        #expect(changes == 1)
        #expect(doubleOwners == 0)
    }

    @Test("the owner's messages stop (SIGKILL): another owns the device within lease + 2 s")
    func lapse() {
        var fleet = Fleet(["a", "b", "c"], rssi: [-60, -65, -75])
        fleet.step(20)
        #expect(fleet.owners == [0])
        fleet.alive[0] = false
        var seconds = 0
        while fleet.owners.isEmpty || fleet.owners == [0] {
            fleet.step()
            seconds += 1
            if seconds > 30 { break }
        }
        #expect(fleet.owners == [1])
        #expect(seconds <= 15 + 2)
    }

    @Test("an owner's will (offline) hands its devices over at once")
    func will() {
        var fleet = Fleet(["a", "b"], rssi: [-60, -65])
        fleet.step(20)
        #expect(fleet.owners == [0])
        fleet.alive[0] = false
        fleet.views[1].wentOffline("a")
        fleet.step(3)
        #expect(fleet.owners == [1])
    }

    @Test("the new owner skips the reading the old one published last, then publishes the next")
    func noDuplicateAtHandover() {
        var fleet = Fleet(["a", "b"], rssi: [-60, -65])
        fleet.step(20)
        let published1 = fleet.views[0].publishes(Self.device, key: 41, now: fleet.now)
        #expect(published1)
        let published2 = fleet.views[1].publishes(Self.device, key: 41, now: fleet.now)
        #expect(!published2)
        fleet.step()  // a's message carries key 41
        fleet.alive[0] = false
        fleet.views[1].wentOffline("a")
        fleet.step(3)
        #expect(fleet.owners == [1])
        let published3 = fleet.views[1].publishes(Self.device, key: 41, now: fleet.now)
        #expect(!published3)
        let published4 = fleet.views[1].publishes(Self.device, key: 42, now: fleet.now)
        #expect(published4)
        let published5 = fleet.views[1].publishes(Self.device, key: 41, now: fleet.now)
        #expect(published5)  // a new frame with an old counter value
    }

    @Test("two owners after a partition heals: the better keeps it, the other lets go")
    func partitionHeals() {
        var a = Self.view("a")
        var b = Self.view("b")
        for second in 1...20 {
            let now = Double(second)
            a.heard(Self.device, rssi: -60, now: now)
            b.heard(Self.device, rssi: -70, now: now)
            _ = a.evaluate(now: now)
            _ = b.evaluate(now: now)
        }
        #expect(a.role(Self.device) == .owner && b.role(Self.device) == .owner)
        b.received(a.message(now: 21), now: 21)
        a.received(b.message(now: 21), now: 21)
        let bChanges = b.evaluate(now: 21)
        let aChanges = a.evaluate(now: 21)
        #expect(bChanges == [.lost(Self.device)])
        #expect(aChanges.isEmpty)
        #expect(a.role(Self.device) == .owner && b.role(Self.device) == .none)
    }

    @Test("the message codec round-trips, and refuses what is not a fleet message")
    func codec() throws {
        let message = FleetView.Message(
            gateway: "pi-hall", online: true,
            sightings: [
                FleetView.Sighting(address: Self.device, rssi: -67, claim: .owner, key: 0xA7),
                FleetView.Sighting(address: 1, rssi: nil, claim: .none, key: nil),
            ])
        let bytes = FleetMessageCodec.encode(message)
        #expect(
            String(decoding: bytes, as: UTF8.self)
                == #"{"gateway":"pi-hall","state":"online","devices":[["a4c138000004",-67,1,"00000000000000a7"],["000000000001",null,0,null]]}"#
        )
        #expect(try FleetMessageCodec.decode(bytes) == message)
        for bad in [
            #"[]"#, #"{"state":"online","devices":[]}"#, #"{"gateway":"x","state":"maybe","devices":[]}"#,
            #"{"gateway":"x","state":"online","devices":[["a4c13800000",-1,1,null]]}"#,
            #"{"gateway":"x","state":"online","devices":[["a4c138000004",-300,1,null]]}"#,
            #"{"gateway":"x","state":"online","devices":[["a4c138000004",-1,3,null]]}"#,
            #"{"gateway":"x","state":"online","devices":[["a4c138000004",-60.5,1,null]]}"#,
            #"{"gateway":"x","state":"online","devices":[["a4c138000004",-1,1,"zz"]]}"#, "not json",
        ] {
            #expect(throws: FleetMessageCodec.Invalid.self) { try FleetMessageCodec.decode(Array(bad.utf8)) }
        }
    }
}

@Suite("config.json fleet")
struct FleetConfigTests {
    @Test("off by default; gateway_id defaults to the MQTT client id; the bridge topics move under it")
    func defaults() throws {
        let plain = try GatewayConfig.parse(Array(#"{"mqtt": {"client_id": "pi-1"}}"#.utf8))
        #expect(!plain.fleet.enabled)
        #expect(plain.fleet.hysteresisDB == 6 && plain.fleet.handoverAfter == 30 && plain.fleet.lease == 15)
        #expect(plain.bridgeTopic == "gattway/bridge")
        let fleet = try GatewayConfig.parse(Array(#"{"mqtt": {"client_id": "pi-1"}, "fleet": {"enabled": true}}"#.utf8))
        #expect(fleet.gatewayID == "pi-1")
        #expect(fleet.bridgeTopic == "gattway/bridge/pi-1")
        #expect(Gateway.lastWill(for: fleet).topic == "gattway/bridge/pi-1/state")
        #expect(Gateway.subscriptions(for: fleet).contains("gattway/fleet/+"))
        let named = try GatewayConfig.parse(
            Array(
                #"{"fleet": {"enabled": true, "gateway_id": "hall", "hysteresis_db": 8, "handover_after": "1m", "lease": "20s"}}"#
                    .utf8))
        #expect(named.gatewayID == "hall" && named.fleet.hysteresisDB == 8)
        #expect(named.fleet.handoverAfter == 60 && named.fleet.lease == 20)
    }

    @Test("mqtt.alternate_servers: more brokers of the same scheme, without credentials; mqtt.subscription_qos 0–2")
    func alternateServers() throws {
        let config = try GatewayConfig.parse(
            Array(
                #"{"mqtt": {"server": "mqtt://10.0.0.1", "alternate_servers": ["mqtt://10.0.0.2:1884", "mqtt://[::1]"]}}"#
                    .utf8))
        #expect(config.mqtt.alternateServers == ["mqtt://10.0.0.2:1884", "mqtt://[::1]"])
        #expect(config.mqtt.subscriptionQoS == 1)
        #expect(try GatewayConfig.parse(Array(#"{"mqtt": {"subscription_qos": 0}}"#.utf8)).mqtt.subscriptionQoS == 0)
        #expect(throws: (any Error).self) { try GatewayConfig.parse(Array(#"{"mqtt": {"subscription_qos": 3}}"#.utf8)) }
        for bad in [
            #"{"mqtt": {"alternate_servers": ["mqtts://10.0.0.2"]}}"#,
            #"{"mqtt": {"alternate_servers": ["mqtt://u:p@10.0.0.2"]}}"#,
            #"{"mqtt": {"alternate_servers": ["10.0.0.2"]}}"#, #"{"mqtt": {"alternate_servers": "mqtt://10.0.0.2"}}"#,
        ] {
            #expect(throws: (any Error).self) { try GatewayConfig.parse(Array(bad.utf8)) }
        }
    }

    @Test(
        "bad values are config errors that name the key",
        arguments: [
            #"{"fleet": {"gateway_id": "a/b"}}"#, ##"{"fleet": {"gateway_id": "#"}}"##,
            #"{"fleet": {"hysteresis_db": -1}}"#, #"{"fleet": {"lease": "1s"}}"#, #"{"fleet": {"lease": 0}}"#,
            #"{"fleet": {"enabled": "yes"}}"#, #"{"fleet": {"leas": "10s"}}"#,
        ])
    func problems(_ text: String) {
        #expect(throws: (any Error).self) { try GatewayConfig.parse(Array(text.utf8)) }
    }
}

@Suite("Fleet commands across a handover")
struct FleetCommandTests {
    static let device = FleetViewTests.device

    @Test(
        "a command that arrives while the owner lets go runs once: the claimant holds it and runs it unless the owner's release lists it"
    )
    func heldCommands() {
        var a = FleetViewTests.view("a", handoverAfter: 2)
        var b = FleetViewTests.view("b", handoverAfter: 2)
        var now = 0.0
        func step(_ rssiA: Int, _ rssiB: Int) {
            now += 1
            a.heard(Self.device, rssi: rssiA, now: now)
            b.heard(Self.device, rssi: rssiB, now: now)
            let (ma, mb) = (a.message(now: now), b.message(now: now))
            a.received(mb, now: now)
            b.received(ma, now: now)
            _ = a.evaluate(now: now)
            _ = b.evaluate(now: now)
        }
        for _ in 0..<20 { step(-60, -70) }
        #expect(a.role(Self.device) == .owner)
        // Command 1 reaches the owner, which runs it; command 2 reaches it too late (below).
        let first = FleetView.commandHash(topic: "gattway/lamp/set", payload: Array(#"{"lamp":1}"#.utf8))
        let second = FleetView.commandHash(topic: "gattway/lamp/set", payload: Array(#"{"lamp":2}"#.utf8))
        #expect(first != second)
        // The device moves next to b: after handover_after b claims it.
        var claimedAt: Double?
        for _ in 0..<10 {
            now += 1
            a.heard(Self.device, rssi: -85, now: now)
            b.heard(Self.device, rssi: -60, now: now)
            _ = b.evaluate(now: now)
            if case .claiming = b.role(Self.device) {
                claimedAt = now
                break
            }
            a.received(b.message(now: now), now: now)
            b.received(a.message(now: now), now: now)
            _ = a.evaluate(now: now)
        }
        #expect(claimedAt != nil)
        // Both commands arrive now, at both gateways: a still owns the device and runs the
        // first; b, claiming, holds both.
        a.ran(Self.device, hash: first, now: now)
        let heldFirst = b.hold(Self.device, hash: first, now: now)
        let heldSecond = b.hold(Self.device, hash: second, now: now)
        #expect(heldFirst && heldSecond)
        // a sees b's claim and lets go (its release lists the first command); b owns it.
        a.received(b.message(now: now), now: now)
        let lost = a.evaluate(now: now)
        #expect(lost == [.lost(Self.device)])
        b.received(a.message(now: now), now: now)
        let gained = b.evaluate(now: now)
        #expect(gained == [.gained(Self.device)])
        let toRun = b.takeHeld(Self.device, now: now)
        #expect(toRun == [second])
        #expect(b.takeHeld(Self.device, now: now).isEmpty)
        // A gateway that does not claim the device holds nothing: its owner runs it.
        let heldByOwnerlessPeer = a.hold(Self.device, hash: second, now: now)
        #expect(!heldByOwnerlessPeer)
    }

    @Test("the hashes of the commands run travel in the fleet message")
    func codec() throws {
        let message = FleetView.Message(
            gateway: "a", online: true,
            sightings: [
                FleetView.Sighting(address: 5, rssi: -60, claim: .none, key: nil, ran: [1, 0xFFFF_FFFF_FFFF_FFFF])
            ])
        let bytes = FleetMessageCodec.encode(message)
        #expect(
            String(decoding: bytes, as: UTF8.self)
                == #"{"gateway":"a","state":"online","devices":[["000000000005",-60,0,null,["0000000000000001","ffffffffffffffff"]]]}"#
        )
        #expect(try FleetMessageCodec.decode(bytes) == message)
        let tooMany =
            #"{"gateway":"a","state":"online","devices":[["000000000005",-60,0,null,["#
            + Array(repeating: #""0000000000000001""#, count: 17).joined(separator: ",") + "]]]}"
        #expect(throws: FleetMessageCodec.Invalid.self) { try FleetMessageCodec.decode(Array(tooMany.utf8)) }
    }
}
