import Bluetooth
import EventLoop
import Gateway
import JSON
import Synchronization
import Testing

@testable import ProxyBackend

@Suite("Bluetooth proxy backend: connections in the core's slots and jobs")
struct ProxyBackendTests {
    static let a = BluetoothAddress(rawValue: 0x0000_0000_000A)
    static let b = BluetoothAddress(rawValue: 0x0000_0000_000B)
    /// Devices of the gateway's own `connect` rule.
    static let g = BluetoothAddress(rawValue: 0xAA00_0000_0001)
    static let g2 = BluetoothAddress(rawValue: 0xAA00_0000_0002)
    static let gatewayRule = #"{"match": {"address_prefix": "AA:00:00"}, "connect": true}"#

    @Test("a connect takes a slot at once, or is refused at once when none is free: never queued, never retried")
    func slotAtOnceOrRefused() async throws {
        let harness = try ProxyHarness(maxConnections: 1)
        harness.proxyBLE.add(Self.a)
        harness.proxyBLE.add(Self.b)
        try await harness.start()
        #expect(try await harness.sharedFreeSlots == 1)
        #expect(try await harness.connect(Self.a))
        #expect(harness.answers.all == ["connected 517"])
        #expect(try await harness.sharedFreeSlots == 0)
        #expect(try await !harness.connect(Self.b))
        try await harness.disconnect(Self.a)
        #expect(harness.proxyBLE.disconnects == [Self.a])
        #expect(try await harness.sharedFreeSlots == 1)
        // b was refused, not queued: the freed slot does not start it.
        #expect(harness.proxyBLE.connects == [Self.a])
        #expect(harness.answers.all == ["connected 517"])
    }

    @Test(
        "a device the central does not know is tried, as an ESP32 proxy tries any address (the central waits for a scan to see it); its failure frees the slot"
    )
    func unknownDeviceTried() async throws {
        let harness = try ProxyHarness(maxConnections: 1)
        harness.proxyBLE.add(Self.a)
        try await harness.start()
        #expect(try await harness.connect(Self.b))
        #expect(harness.proxyBLE.connects == [Self.b])
        #expect(harness.answers.all == ["failed 133"])
        #expect(try await harness.sharedFreeSlots == 1)
        #expect(try await harness.connect(Self.a))
        #expect(harness.answers.all == ["failed 133", "connected 517"])
    }

    @Test("a gateway device waits while the proxy holds the last slot, and connects once the link is down")
    func gatewayWaitsForTheProxysSlot() async throws {
        let harness = try ProxyHarness(maxConnections: 1, gatewayDevices: Self.gatewayRule)
        harness.proxyBLE.add(Self.a)
        harness.ble.add(Self.g, .init(characteristics: []))
        try await harness.start()
        #expect(try await harness.connect(Self.a))
        await harness.gateway.handle(BLEDiscovery(address: Self.g, advertisement: .init(rssi: -50)))
        await harness.loop.settle()
        #expect(harness.ble.connectAttempts.isEmpty)
        harness.proxyBLE.disconnectGate.close()
        try await harness.disconnect(Self.a)
        // The slot is the proxy's until its link is down.
        #expect(harness.ble.connectAttempts.isEmpty)
        harness.proxyBLE.disconnectGate.open()
        await harness.loop.settle()
        await harness.gateway.waitUntilIdle()
        #expect(harness.ble.connectAttempts == [Self.g])
        #expect(harness.ble.isConnected(Self.g))
    }

    @Test("a device the gateway holds shares its slot through the proxy, and stays up after the client is done")
    func sharedLink() async throws {
        let harness = try ProxyHarness(maxConnections: 1, gatewayDevices: Self.gatewayRule)
        try await harness.startHolding(Self.g, proxyAlso: Self.a)
        #expect(harness.ble.isConnected(Self.g))
        #expect(try await harness.sharedFreeSlots == 0)
        #expect(try await harness.connect(Self.g))
        #expect(harness.answers.all == ["connected 517"])
        #expect(try await !harness.connect(Self.a))  // no second slot was taken, but none is left
        try await harness.disconnect(Self.g)
        #expect(harness.proxyBLE.disconnects.isEmpty)
        #expect(harness.ble.isConnected(Self.g))
        #expect(try await harness.sharedFreeSlots == 0)
    }

    @Test("a connect to a device whose disconnect is under way waits for its end")
    func connectWaitsForDisconnect() async throws {
        let harness = try ProxyHarness(maxConnections: 2)
        try await harness.startDisconnecting(Self.a)
        #expect(harness.proxyBLE.disconnects == [Self.a])
        #expect(try await harness.connect(Self.a))  // its slot is still held: no second one
        #expect(try await harness.sharedFreeSlots == 1)
        #expect(harness.proxyBLE.connects == [Self.a])
        #expect(harness.answers.all == ["connected 517"])
        harness.proxyBLE.disconnectGate.open()
        await harness.loop.settle()
        #expect(harness.proxyBLE.connects == [Self.a, Self.a])
        #expect(harness.answers.all == ["connected 517", "connected 517"])
    }

    @Test("the server hears a change of the free slots once per event that changed them, none when unchanged")
    func slotChangesOncePerEvent() async throws {
        let harness = try ProxyHarness(maxConnections: 2, gatewayDevices: Self.gatewayRule)
        harness.proxyBLE.add(Self.a)
        harness.ble.add(Self.g, .init(characteristics: []))
        harness.ble.add(Self.g2, .init(characteristics: []))
        try await harness.start()
        #expect(harness.server.slotsChanged == 0)
        #expect(try await harness.connect(Self.a))  // 2 → 1
        #expect(harness.server.slotsChanged == 1)
        await harness.gateway.handle(BLEDiscovery(address: Self.g, advertisement: .init(rssi: -50)))
        await harness.gateway.waitUntilIdle()  // 1 → 0
        #expect(harness.server.slotsChanged == 2)
        await harness.gateway.handle(BLEDiscovery(address: Self.g2, advertisement: .init(rssi: -50)))
        await harness.loop.settle()  // g2 waits: no change
        #expect(harness.server.slotsChanged == 2)
        // The end of the proxy's disconnect gives its slot to g2 in the same event: 0 → 0.
        try await harness.disconnect(Self.a)
        await harness.gateway.waitUntilIdle()
        #expect(harness.ble.connectAttempts == [Self.g, Self.g2])
        #expect(harness.server.slotsChanged == 2)
        harness.ble.dropLink(Self.g)  // 0 → 1
        await harness.loop.settle()
        #expect(harness.server.slotsChanged == 3)
        #expect(try await harness.sharedFreeSlots == 1)
    }

    @Test("the stop makes the disconnects under way again, after the core's jobs ended, and waits for them")
    func stopWaitsForDisconnects() async throws {
        let harness = try ProxyHarness(maxConnections: 1)
        try await harness.startDisconnecting(Self.a)
        // As `gattway run` stops: the core's jobs end first (the disconnect's is cancelled) …
        await harness.endJobs()
        #expect(harness.proxyBLE.disconnects == [Self.a])
        // … then the proxy's stop.
        let returned = Mutex(false)
        let backend = harness.backend
        let stop = Task(executorPreference: harness.loop.taskExecutor) {
            await backend.stop()
            returned.withLock { $0 = true }
        }
        await harness.loop.settle()
        #expect(harness.proxyBLE.disconnects == [Self.a, Self.a])
        #expect(!returned.withLock { $0 })
        #expect(try await harness.sharedFreeSlots == 0)
        harness.proxyBLE.disconnectGate.open()
        await stop.value
        #expect(returned.withLock { $0 })
        #expect(try await harness.sharedFreeSlots == 1)
        #expect(!harness.proxyBLE.isConnected(Self.a))
    }

    @Test("a notification reaches the server; a read is answered; a lost link is reported (0x13) and frees its slot")
    func notificationsAndLinkLost() async throws {
        let harness = try ProxyHarness(maxConnections: 1)
        harness.proxyBLE.add(Self.a)
        try await harness.start()
        #expect(try await harness.connect(Self.a))
        try await harness.notify(Self.a, handle: 0x0B)
        try await harness.read(Self.a, handle: 0x0B)
        try await harness.read(Self.a, handle: 0x99)
        #expect(harness.answers.all == ["connected 517", "notify 0", "read [73]", "read failed 1"])
        harness.proxyBLE.notify(Self.a, 0x0B, [42])
        await harness.loop.settle()
        #expect(harness.server.notifications.map { "\($0.address) \($0.handle) \($0.data)" } == ["10 11 [42]"])
        harness.proxyBLE.dropLink(Self.a)
        await harness.loop.settle()
        #expect(harness.server.lost.map { "\($0.address) \($0.error)" } == ["10 19"])
        #expect(try await harness.sharedFreeSlots == 1)
        #expect(harness.proxyBLE.subscriptionCount == 0)
    }

    @Test("a link this host ended (the gateway's disconnect, the adapter off) is reported 0x16 and frees its slot")
    func linkEndedLocally() async throws {
        let harness = try ProxyHarness(maxConnections: 2)
        harness.proxyBLE.add(Self.a)
        try await harness.start()
        #expect(try await harness.connect(Self.a))
        harness.proxyBLE.dropLink(Self.a, .local)
        await harness.loop.settle()
        #expect(harness.server.lost.map { "\($0.address) \($0.error)" } == ["10 22"])
        #expect(try await harness.sharedFreeSlots == 2)
    }

    @Test("a second connect of a connected device is answered with its link: no second connection, notifications kept")
    func duplicateConnect() async throws {
        let harness = try ProxyHarness(maxConnections: 2)
        harness.proxyBLE.add(Self.a)
        try await harness.start()
        #expect(try await harness.connect(Self.a))
        try await harness.notify(Self.a, handle: 0x0B)
        #expect(try await harness.connect(Self.a))
        #expect(harness.answers.all == ["connected 517", "notify 0", "connected 517"])
        #expect(harness.proxyBLE.connects == [Self.a])
        #expect(try await harness.sharedFreeSlots == 1)
        harness.proxyBLE.notify(Self.a, 0x0B, [7])
        await harness.loop.settle()
        #expect(harness.server.notifications.map { "\($0.address) \($0.handle) \($0.data)" } == ["10 11 [7]"])
        try await harness.disconnect(Self.a)
        #expect(harness.proxyBLE.disconnects == [Self.a])
        #expect(try await harness.sharedFreeSlots == 2)
    }

    @Test(
        "clearing the cache forgets a device only the client holds (its end reported 0x16 after the answer), not the gateway's"
    )
    func clearCache() async throws {
        let harness = try ProxyHarness(maxConnections: 2, gatewayDevices: Self.gatewayRule)
        try await harness.startHolding(Self.g, proxyAlso: Self.a)
        try await harness.clearCache(Self.g)
        #expect(harness.answers.all == ["clear cache 130"])  // 0x82: the gateway's link would end
        #expect(try await harness.connect(Self.a))
        #expect(try await harness.sharedFreeSlots == 0)
        try await harness.clearCache(Self.a)
        #expect(harness.answers.all == ["clear cache 130", "connected 517", "clear cache 0"])
        #expect(harness.proxyBLE.removed == [Self.a])
        #expect(harness.server.lost.map { "\($0.address) \($0.error)" } == ["10 22"])
        #expect(try await harness.sharedFreeSlots == 1)
    }

    @Test("bridge/health has the proxy's bluetooth_proxy section, from the server's counters")
    func healthSection() async throws {
        let harness = try ProxyHarness(maxConnections: 1, health: true)
        try await harness.start()
        harness.server.setStatistics {
            $0.clients = 1
            $0.proxyConnections = 1
            $0.proxyConnects = 4
            $0.handshakeFailures = 2
        }
        let payload = await harness.gateway.healthPayload
        let proxy = payload["bluetooth_proxy"]
        #expect(proxy?["clients"] == .number(1))
        #expect(proxy?["connections"] == .number(1))
        #expect(proxy?["connects"] == .number(4))
        #expect(proxy?["closed"]?["handshake"] == .number(2))
    }
}
