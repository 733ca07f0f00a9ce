import Bluetooth
import Synchronization
import Testing

@testable import Gateway

@Suite("Connection scheduler: concurrency bound and fair queue")
struct SchedulerTests {
    static let a = address("00:00:00:00:00:0A"), b = address("00:00:00:00:00:0B")
    static let c = address("00:00:00:00:00:0C"), d = address("00:00:00:00:00:0D")

    @Test("at most `limit` links; the rest wait first come, first served; a device queues once")
    func bound() {
        var scheduler = ConnectionScheduler(limit: 2)
        #expect(scheduler.request(Self.a, urgent: false) == [Self.a])
        #expect(scheduler.request(Self.b, urgent: false) == [Self.b])
        #expect(scheduler.request(Self.c, urgent: false) == [])
        #expect(scheduler.request(Self.d, urgent: false) == [])
        #expect(scheduler.request(Self.c, urgent: false) == [])
        #expect(scheduler.waiting == [Self.c, Self.d])
        #expect(scheduler.release(Self.a) == [Self.c])
        #expect(scheduler.release(Self.b) == [Self.d])
        #expect(scheduler.active == [Self.c, Self.d])
    }

    @Test("a device a command waits for goes ahead of background reconnects")
    func urgentFirst() {
        var scheduler = ConnectionScheduler(limit: 1)
        _ = scheduler.request(Self.a, urgent: false)
        _ = scheduler.request(Self.b, urgent: false)
        _ = scheduler.request(Self.c, urgent: true)
        #expect(scheduler.waiting == [Self.c, Self.b])
        #expect(scheduler.release(Self.a) == [Self.c])
    }

    @Test("the proxy's reservations share the budget, at once or not at all; a device held by both counts once")
    func reservations() {
        var scheduler = ConnectionScheduler(limit: 2)
        #expect(scheduler.request(Self.a, urgent: false) == [Self.a])
        #expect(scheduler.free == 1)
        #expect(scheduler.reserve(Self.c) == true)  // the free slot
        #expect(scheduler.free == 0)
        #expect(scheduler.reserve(Self.d) == false)  // none left: refused, not queued
        #expect(scheduler.reserve(Self.a) == true)  // the gateway's own link: shared, no second slot
        #expect(scheduler.reserve(Self.c) == true)  // reserved already
        #expect(scheduler.used == 2 && Set(scheduler.reserved) == [Self.c, Self.a])
        #expect(scheduler.request(Self.b, urgent: false) == [])  // the gateway's next device waits
        #expect(scheduler.unreserve(Self.a) == [])  // a's slot stays the gateway's
        #expect(scheduler.unreserve(Self.c) == [Self.b])  // the freed slot goes to the device waiting
        #expect(scheduler.free == 0)
        #expect(scheduler.unreserve(Self.d) == [])  // never reserved: nothing changes
        #expect(scheduler.release(Self.a) == [] && scheduler.free == 1)
    }

    @Test("a device the gateway asks for while the proxy holds it shares that slot and starts at once")
    func reservedThenRequested() {
        var scheduler = ConnectionScheduler(limit: 1)
        #expect(scheduler.reserve(Self.a) == true)
        #expect(scheduler.request(Self.b, urgent: true) == [])
        #expect(scheduler.request(Self.a, urgent: false) == [Self.a])
        #expect(scheduler.used == 1 && scheduler.waiting == [Self.b])
        #expect(scheduler.release(Self.a) == [])  // still reserved: the slot stays taken
        #expect(scheduler.unreserve(Self.a) == [Self.b])
    }

    @Test("seeded random requests, releases, reservations: never over the limit, nobody waits beside a free slot")
    func randomBudget() {
        var state: UInt64 = 0x5EED
        func random(_ bound: Int) -> Int {  // SplitMix64: the same sequence every run
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return Int((z ^ (z >> 31)) % UInt64(bound))
        }
        let devices = (0..<8).map { BluetoothAddress(rawValue: UInt64($0) + 1) }
        var scheduler = ConnectionScheduler(limit: 3)
        var granted = 0
        for _ in 0..<20_000 {
            let device = devices[random(devices.count)]
            switch random(5) {
            case 0: _ = scheduler.request(device, urgent: random(2) == 0)
            case 1: _ = scheduler.release(device)
            case 2: if scheduler.reserve(device) { granted += 1 }
            case 3: _ = scheduler.unreserve(device)
            default:
                // What reserve answers: free now, or shared with the gateway's link.
                let expected =
                    scheduler.isReserved(device) || scheduler.isActive(device) || scheduler.used < scheduler.limit
                #expect(scheduler.reserve(device) == expected)
                _ = scheduler.unreserve(device)
            }
            let holders = Set(scheduler.active).union(scheduler.reserved)
            #expect(scheduler.used == holders.count && scheduler.used <= scheduler.limit)
            #expect(scheduler.waiting.isEmpty || scheduler.free == 0)
            #expect(Set(scheduler.waiting).isDisjoint(with: scheduler.active))
        }
        #expect(granted > 100)
    }

    @Test("through the gateway: the proxy's reservations and the gateway's links share max_connections")
    func gatewaySharesSlots() async throws {
        let harness = try Harness(
            """
            {"bluetooth": {"max_connections": 2},
             "devices": [{"match": {"address_prefix": "00:00:00"}, "connect": true}]}
            """)
        harness.ble.add(Self.a, .init(characteristics: []))
        harness.ble.add(Self.b, .init(characteristics: []))
        try await harness.start()
        let observed = Mutex<[Int]>([])
        await harness.gateway.observeConnectionSlots { free in observed.withLock { $0.append(free) } }
        await harness.gateway.handle(BLEDiscovery(address: Self.a, advertisement: .init(rssi: -50)))
        await harness.gateway.waitUntilIdle()
        #expect(await harness.gateway.freeConnectionSlots == 1)
        #expect(await harness.gateway.reserveConnectionSlot(for: Self.c))
        #expect(await !harness.gateway.reserveConnectionSlot(for: Self.d))
        #expect(await harness.gateway.reserveConnectionSlot(for: Self.a))  // the gateway's link: shared
        #expect(await harness.gateway.holdsLink(to: Self.a))
        #expect(await !harness.gateway.holdsLink(to: Self.c))
        await harness.gateway.handle(BLEDiscovery(address: Self.b, advertisement: .init(rssi: -50)))
        await harness.settle()
        #expect(harness.ble.connectAttempts == [Self.a])  // b waits for a slot
        await harness.gateway.releaseConnectionSlot(for: Self.a)
        await harness.settle()
        #expect(harness.ble.connectAttempts == [Self.a])  // a's slot is still the gateway's
        await harness.gateway.releaseConnectionSlot(for: Self.c)
        await harness.gateway.waitUntilIdle()
        #expect(harness.ble.connectAttempts == [Self.a, Self.b])  // the freed slot went to b
        #expect(await harness.gateway.freeConnectionSlots == 0)
        // 2 at first, 1 with a's link, 0 with the reservation; b taking the freed slot is no change.
        #expect(observed.withLock { $0 } == [2, 1, 0])
        harness.ble.dropLink(Self.b)
        await harness.settle()
        #expect(await harness.gateway.freeConnectionSlots == 1)
        #expect(observed.withLock { $0 } == [2, 1, 0, 1])
    }

    @Test("through the gateway: max_connections 1 connects the second device only after the first link ends")
    func gatewayBound() async throws {
        let harness = try Harness(
            """
            {"bluetooth": {"max_connections": 1},
             "devices": [{"match": {"address_prefix": "00:00:00"}, "connect": true}]}
            """)
        harness.ble.add(Self.a, .init(characteristics: []))
        harness.ble.add(Self.b, .init(characteristics: []))
        try await harness.start()
        await harness.gateway.handle(BLEDiscovery(address: Self.a, advertisement: .init(rssi: -50)))
        await harness.gateway.handle(BLEDiscovery(address: Self.b, advertisement: .init(rssi: -50)))
        await harness.gateway.waitUntilIdle()
        #expect(harness.ble.connectAttempts == [Self.a])
        harness.ble.dropLink(Self.a)
        await harness.settle()
        #expect(harness.ble.connectAttempts == [Self.a, Self.b])
    }
}
