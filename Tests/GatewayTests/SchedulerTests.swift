import Bluetooth
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
