import Gateway
import Testing

@testable import Gateway

/// A device pinned to a gateway (`devices[].prefer_gateway`, docs/fleet.md "A preferred
/// gateway"), on ``FleetView`` alone: views exchange their messages by hand each second, as in
/// FleetViewTests, with the device's preference known to every view from the same rules.
@Suite("Fleet ownership: a preferred gateway")
struct FleetPreferenceTests {
    static let device: UInt64 = 0xA4C1_3800_0007

    struct Fleet {
        var names: [String]
        var views: [FleetView]
        /// Each view's RSSI of the device (nil: it does not hear it).
        var rssi: [Int?]
        var alive: [Bool]
        var preference: FleetView.Preference?
        var now = 0.0
        let settings: (hysteresis: Double, handoverAfter: Double, lease: Double) = (6, 30, 15)

        init(_ names: [String], rssi: [Int?], prefer: String?, floor: Double = -90) {
            self.names = names
            self.rssi = rssi
            alive = names.map { _ in true }
            preference = prefer.map { FleetView.Preference(gateway: $0, floor: floor) }
            views = []
            views = names.map { view($0) }
        }

        func view(_ name: String) -> FleetView {
            FleetView(
                settings: FleetView.Settings(
                    me: name, hysteresis: settings.hysteresis, handoverAfter: settings.handoverAfter,
                    lease: settings.lease),
                now: now)
        }

        /// Gateway `index` starts again (a restart: a new view, listening for a lease first).
        mutating func restart(_ index: Int) {
            views[index] = view(names[index])
            alive[index] = true
        }

        mutating func step(_ seconds: Int = 1) {
            for _ in 0..<seconds {
                now += 1
                for index in views.indices where alive[index] {
                    if let value = rssi[index] {
                        views[index].heard(FleetPreferenceTests.device, rssi: value, now: now, preference: preference)
                    }
                }
                let messages = views.indices.filter { alive[$0] }.map { views[$0].message(now: now) }
                for index in views.indices where alive[index] {
                    for message in messages { views[index].received(message, now: now) }
                    _ = views[index].evaluate(now: now)
                }
            }
        }

        var owners: [Int] {
            views.indices.filter { alive[$0] && views[$0].role(FleetPreferenceTests.device) == .owner }
        }

        /// Steps `seconds`, counting the changes of owner and the seconds with two owners.
        mutating func watch(_ seconds: Int) -> (changes: Int, doubleOwners: Int, firstChangeAfter: Int?) {
            var changes = 0
            var doubles = 0
            var first: Int?
            var owner = owners
            for second in 1...seconds {
                step()
                if owners.count > 1 { doubles += 1 }
                if owners != owner, !owners.isEmpty {
                    changes += 1
                    if first == nil { first = second }
                    owner = owners
                }
            }
            return (changes, doubles, first)
        }
    }

    @Test("the preferred gateway owns the device while it hears it above the floor, however much better others do")
    func weakButPreferred() {
        var fleet = Fleet(["hall", "kitchen"], rssi: [-86, -50], prefer: "hall")
        fleet.step(20)
        #expect(fleet.owners == [0])
        let watched = fleet.watch(300)
        #expect(watched.changes == 0)
        #expect(fleet.owners == [0])
    }

    @Test("without a preference the same levels give the device to the better gateway (as before)")
    func noPreference() {
        var fleet = Fleet(["hall", "kitchen"], rssi: [-86, -50], prefer: nil)
        fleet.step(20)
        #expect(fleet.owners == [1])
        // A preference for a gateway not in the fleet changes nothing either.
        var other = Fleet(["hall", "kitchen"], rssi: [-86, -50], prefer: "garage")
        other.step(20)
        #expect(other.owners == [1])
    }

    @Test("below the floor the preferred gateway is one like the others")
    func belowFloor() {
        var fleet = Fleet(["hall", "kitchen"], rssi: [-94, -50], prefer: "hall")
        fleet.step(20)
        #expect(fleet.owners == [1])
    }

    @Test("the preferred gateway stops hearing the device: another takes it within seconds")
    func preferredStopsHearing() {
        var fleet = Fleet(["hall", "kitchen", "garage"], rssi: [-80, -50, -70], prefer: "hall")
        fleet.step(20)
        #expect(fleet.owners == [0])
        fleet.rssi[0] = nil
        var seconds = 0
        while fleet.owners != [1], seconds < 30 {
            fleet.step()
            seconds += 1
        }
        #expect(fleet.owners == [1])
        #expect(seconds <= 6)  // three advertising intervals (3 s at least), the claim's second, a tick
    }

    @Test("the preferred gateway lapses (SIGKILL): the best other owns the device within lease + 2 s")
    func preferredLapses() {
        var fleet = Fleet(["hall", "kitchen", "garage"], rssi: [-80, -50, -70], prefer: "hall")
        fleet.step(20)
        #expect(fleet.owners == [0])
        fleet.alive[0] = false
        var seconds = 0
        while fleet.owners != [1], seconds < 30 {
            fleet.step()
            seconds += 1
        }
        #expect(fleet.owners == [1])
        #expect(seconds <= 15 + 2)
    }

    @Test("the preferred gateway back: it takes the device back after handover_after, once, never two owners")
    func preferredBack() {
        var fleet = Fleet(["hall", "kitchen"], rssi: [-80, -50], prefer: "hall")
        fleet.step(20)
        fleet.alive[0] = false
        fleet.step(20)
        #expect(fleet.owners == [1])
        // hall starts again: it listens for a lease, then hears the device above the floor by
        // the hysteresis for handover_after, claims it, and kitchen releases it.
        fleet.restart(0)
        let watched = fleet.watch(90)
        #expect(fleet.owners == [0])
        #expect(watched.changes == 1)
        #expect(watched.doubleOwners == 0)
        #expect((watched.firstChangeAfter ?? 0) >= 15 + 30)
        #expect((watched.firstChangeAfter ?? 999) <= 15 + 30 + 3)
    }

    @Test("a level between the floor and floor + hysteresis keeps the device but does not take it back")
    func floorHysteresis() {
        var fleet = Fleet(["hall", "kitchen"], rssi: [-80, -50], prefer: "hall")
        fleet.step(20)
        #expect(fleet.owners == [0])
        fleet.rssi[0] = -88  // still above the floor (-90): hall keeps it
        var watched = fleet.watch(120)
        #expect(watched.changes == 0)
        #expect(fleet.owners == [0])
        fleet.rssi[0] = nil  // gone: kitchen takes it
        fleet.step(10)
        #expect(fleet.owners == [1])
        fleet.rssi[0] = -88  // back, but not by the hysteresis above the floor: no take-back
        watched = fleet.watch(120)
        #expect(watched.changes == 0)
        #expect(fleet.owners == [1])
        fleet.rssi[0] = -83  // floor + 6 dB and more: hall takes it back after handover_after
        watched = fleet.watch(60)
        #expect(fleet.owners == [0])
        #expect(watched.changes == 1)
        #expect(watched.doubleOwners == 0)
    }

    @Test("a level jittering around the floor moves the device at most once per handover_after")
    func noFlappingAroundFloor() {
        var fleet = Fleet(["hall", "kitchen"], rssi: [-80, -60], prefer: "hall")
        fleet.step(20)
        #expect(fleet.owners == [0])
        var changes = 0
        var owner = fleet.owners
        for second in 0..<600 {
            fleet.rssi[0] = second % 2 == 0 ? -87 : -93
            fleet.step()
            #expect(fleet.owners.count <= 1)
            if fleet.owners != owner, !fleet.owners.isEmpty {
                changes += 1
                owner = fleet.owners
            }
        }
        // The smoothed level sits near -90: it may cross the floor and let kitchen (better by far)
        // take it, but hall never gets back (that needs -84), so at most one change.
        #expect(changes <= 1)
    }

    @Test("a partition heals with two owners: the preferred one keeps it")
    func partitionHeals() {
        let preference = FleetView.Preference(gateway: "hall", floor: -90)
        let settings = { (me: String) in FleetView.Settings(me: me, hysteresis: 6, handoverAfter: 30, lease: 15) }
        var hall = FleetView(settings: settings("hall"), now: 0)
        var kitchen = FleetView(settings: settings("kitchen"), now: 0)
        for second in 1...20 {
            let now = Double(second)
            hall.heard(Self.device, rssi: -85, now: now, preference: preference)
            kitchen.heard(Self.device, rssi: -55, now: now, preference: preference)
            _ = hall.evaluate(now: now)
            _ = kitchen.evaluate(now: now)
        }
        #expect(hall.role(Self.device) == .owner && kitchen.role(Self.device) == .owner)
        kitchen.received(hall.message(now: 21), now: 21)
        hall.received(kitchen.message(now: 21), now: 21)
        #expect(kitchen.evaluate(now: 21) == [.lost(Self.device)])
        #expect(hall.evaluate(now: 21).isEmpty)
        #expect(kitchen.reasons.first?.reason == "its preferred gateway owned it too")
    }

    // MARK: Configuration

    static func problems(_ json: String) -> [String] {
        do {
            _ = try GatewayConfig.parse(Array(json.utf8))
            return []
        } catch {
            return error.lines
        }
    }

    @Test("prefer_gateway, prefer_adapter and prefer_floor_dbm are read and checked")
    func config() throws {
        let config = try GatewayConfig.parse(
            Array(
                #"""
                {"fleet": {"enabled": true, "gateway_id": "hall"}, "bluetooth": {"adapters": ["hci0", "hci1"]},
                 "devices": [{"match": {"address": "A4:C1:38:00:00:07"}, "prefer_gateway": "kitchen",
                              "prefer_adapter": "hci1", "prefer_floor_dbm": -85},
                             {"match": {}}]}
                """#.utf8))
        #expect(config.devices[0].preferGateway == "kitchen")
        #expect(config.devices[0].preferAdapter == "hci1")
        #expect(config.devices[0].preferFloorDBm == -85)
        #expect(config.devices[1].preferGateway == nil && config.devices[1].preferFloorDBm == -90)

        let noFleet = Self.problems(#"{"devices": [{"match": {}, "prefer_gateway": "hall"}]}"#)
        #expect(noFleet.contains { $0.contains("devices[0].prefer_gateway") && $0.contains("needs fleet.enabled") })
        let badAdapter = Self.problems(
            #"{"bluetooth": {"adapters": ["hci0", "hci1"]}, "devices": [{"match": {}, "prefer_adapter": "hci2"}]}"#)
        #expect(
            badAdapter.contains {
                $0.contains("devices[0].prefer_adapter") && $0.contains("not one of bluetooth.adapters (hci0, hci1)")
            })
        let floorAlone = Self.problems(#"{"devices": [{"match": {}, "prefer_floor_dbm": -80}]}"#)
        #expect(floorAlone.contains { $0.contains("needs prefer_gateway or prefer_adapter") })
        let floorRange = Self.problems(
            #"{"fleet": {"enabled": true}, "devices": [{"match": {}, "prefer_gateway": "a", "prefer_floor_dbm": -200}]}"#
        )
        #expect(floorRange.contains { $0.contains("devices[0].prefer_floor_dbm") })
        let badName = Self.problems(
            #"{"fleet": {"enabled": true}, "devices": [{"match": {}, "prefer_gateway": "a/b"}]}"#)
        #expect(badName.contains { $0.contains("devices[0].prefer_gateway") })
        let typo = Self.problems(#"{"fleet": {"enabled": true}, "devices": [{"match": {}, "prefer_gatway": "a"}]}"#)
        #expect(typo.contains { $0.contains("prefer_gatway") && $0.contains("not a known key") })
    }
}
