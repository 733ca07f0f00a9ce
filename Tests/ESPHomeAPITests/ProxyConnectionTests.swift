import Bluetooth
import ESPHomeAPI
import EventLoop
import GatewayFakes
import Glibc
import Synchronization
import Testing

/// Connections through the proxy, with a backend that answers on the next loop turn: slots,
/// ownership, GATT answers and errors, notifications, links lost, clients leaving, bounds.
@Suite("ESPHome API proxy connections", .serialized)
struct ProxyConnectionTests {
    /// Connects every address but `unknown`; handle 0x0B reads [0x57], 0x0C fails with ATT 0x80;
    /// with `hold`, GATT completions are kept (never called) to fill the in-flight bound.
    final class FakeBackend: BluetoothProxyBackend, @unchecked Sendable {
        let loop: EventLoop
        let unknown: UInt64 = 0x0000_0000_0F0F
        var hold = false
        var held: [@Sendable (Result<[UInt8], ProxyFailure>) -> Void] = []
        let disconnected = Mutex<[UInt64]>([])
        /// A budget shared with others (a gateway's `max_connections`), when set: `sharedTotal`
        /// slots, `othersUsed` of them taken by the others, one per device reserved here.
        var sharedTotal: Int?
        var othersUsed = 0
        var reserved: Set<UInt64> = []

        /// Every connect the backend was asked for: the address and its type.
        let connects = Mutex<[String]>([])

        init(loop: EventLoop) { self.loop = loop }

        func connect(
            address: UInt64, addressType: UInt32, done: @escaping @Sendable (Result<UInt32, ProxyFailure>) -> Void
        ) {
            connects.withLock { $0.append("\(address) type \(addressType)") }
            let result: Result<UInt32, ProxyFailure> = address == unknown ? .failure(.connectionFailed) : .success(247)
            if address == unknown { reserved.remove(address) }
            loop.execute { done(result) }
        }

        func disconnect(address: UInt64) {
            disconnected.withLock { $0.append(address) }
            reserved.remove(address)
        }

        func reserveSlot(address: UInt64) -> Bool {
            guard let sharedTotal, !reserved.contains(address) else { return true }
            guard reserved.count + othersUsed < sharedTotal else { return false }
            reserved.insert(address)
            return true
        }

        var sharedFreeSlots: Int? { sharedTotal.map { $0 - othersUsed - reserved.count } }

        /// Pairing succeeds but for `unknown` (ESP_GATT_AUTH_FAIL); unpair succeeds; clear cache is
        /// refused for `paired` (ESP_GATT_WRONG_STATE). With `hold`, the answers are kept.
        let paired: UInt64 = 0x0000_0000_0A0A
        var heldDeviceAnswers: [@Sendable () -> Void] = []
        let deviceRequests = Mutex<[String]>([])

        func pair(address: UInt64, done: @escaping @Sendable (ProxyFailure?) -> Void) {
            deviceRequests.withLock { $0.append("pair \(address)") }
            answer { done(address == self.unknown ? .authenticationFailed : nil) }
        }

        func unpair(address: UInt64, done: @escaping @Sendable (ProxyFailure?) -> Void) {
            deviceRequests.withLock { $0.append("unpair \(address)") }
            answer { done(nil) }
        }

        func clearCache(address: UInt64, done: @escaping @Sendable (ProxyFailure?) -> Void) {
            deviceRequests.withLock { $0.append("clear cache \(address)") }
            answer { done(address == self.paired ? .wrongState : nil) }
        }

        /// Connection parameters: recorded, the live link uses them.
        let parameterRequests = Mutex<[String]>([])

        func setConnectionParameters(
            address: UInt64, parameters: ConnectionParameters, done: @escaping @Sendable (ProxyFailure?) -> Void
        ) {
            parameterRequests.withLock { $0.append("\(address): \(parameters)") }
            answer { done(nil) }
        }

        private func answer(_ body: @escaping @Sendable () -> Void) {
            if hold { return heldDeviceAnswers.append(body) }
            loop.execute(body)
        }

        func services(address: UInt64, done: @escaping @Sendable (Result<[GATTServiceInfo], ProxyFailure>) -> Void) {
            loop.execute { done(.success(ProxyGATTFixture.batteryService)) }
        }

        func read(
            address: UInt64, handle: UInt16, descriptor: Bool,
            done: @escaping @Sendable (Result<[UInt8], ProxyFailure>) -> Void
        ) {
            if hold { return held.append(done) }
            loop.execute { done(handle == 0x0B ? .success([0x57]) : .failure(ProxyFailure(0x80))) }
        }

        /// With `writeTime`, each write takes that long and they go one after the other (a
        /// link that drains slowly, as a device's queue in the central does).
        var writeTime: Double?
        /// Writes that reached the backend, in order, and the most at once.
        var written: [[UInt8]] = []
        var writesInFlight: [(data: [UInt8], done: @Sendable (ProxyFailure?) -> Void)] = []
        var mostWritesInFlight = 0

        func write(
            address: UInt64, handle: UInt16, descriptor: Bool, data: [UInt8], withResponse: Bool,
            done: @escaping @Sendable (ProxyFailure?) -> Void
        ) {
            guard writeTime != nil else { return loop.execute { done(nil) } }
            writesInFlight.append((data, done))
            mostWritesInFlight = max(mostWritesInFlight, writesInFlight.count)
            if !draining { drainNext() }
        }

        private var draining = false

        /// The first write in flight is done after `writeTime`, then the next.
        private func drainNext() {
            guard let writeTime, !writesInFlight.isEmpty else { return }
            draining = true
            _ = loop.addTimer(after: writeTime) { [self] in
                draining = false
                let (data, done) = writesInFlight.removeFirst()
                written.append(data)
                done(nil)  // may start the next write, and with it the drain
                if !draining { drainNext() }
            }
        }

        func notify(
            address: UInt64, handle: UInt16, enable: Bool, done: @escaping @Sendable (ProxyFailure?) -> Void
        ) {
            loop.execute { done(nil) }
        }
    }

    typealias Harness = APIServerTests.Harness
    typealias TestClient = APIServerTests.TestClient

    /// BluetoothDeviceRequest as bleak-esphome's connects send it: a connect (0, 4, 5) with
    /// `has_address_type` and the address type (nil: without them, as aioesphomeapi before 39.0.1
    /// sends a connect whose caller gave no type).
    static func deviceRequest(_ address: UInt64, _ type: UInt32, addressType: UInt32? = 0) -> [UInt8] {
        var writer = ProtobufWriter()
        writer.varint(1, address)
        writer.uint32(2, type)
        if [0, 4, 5].contains(type), let addressType {
            writer.bool(3, true)
            writer.uint32(4, addressType)
        }
        return writer.bytes
    }

    static func gatt(_ address: UInt64, _ handle: UInt16, _ extra: (inout ProtobufWriter) -> Void = { _ in }) -> [UInt8]
    {
        var writer = ProtobufWriter()
        writer.varint(1, address)
        writer.uint32(2, UInt32(handle))
        extra(&writer)
        return writer.bytes
    }

    static func connected(_ client: inout TestClient) throws -> TestClient {
        client.send(type: MessageType.helloRequest, APIServerTests.hello())
        #expect(client.receive()?.type == MessageType.helloResponse)
        return client
    }

    /// The next message, which must be `expected` (type and payload).
    /// `bluetooth_proxy_feature_flags` (field 15) of the DeviceInfoResponse the proxy answers with.
    static func featureFlags(_ client: inout TestClient) throws -> UInt32 {
        client.send(type: MessageType.deviceInfoRequest)
        let infoReceived = client.receive()
        let info = try #require(infoReceived)
        var reader = ProtobufReader(info.payload)
        var flags: UInt32 = 0
        while let (field, value) = try reader.next() {
            if field == 15 { flags = try value.uint32(field: field) }
        }
        return flags
    }

    static func expectNext(_ client: inout TestClient, _ expected: ServerMessage, _ comment: Comment) {
        let received = client.receive()
        #expect(received?.type == expected.type && received?.payload == expected.payload, comment)
        if let received, received.type == MessageType.bluetoothConnectionsFreeResponse {
            expectConsistentSlots(received.payload, comment)
        }
    }

    /// bleak-esphome's check of every BluetoothConnectionsFreeResponse: as many addresses
    /// allocated as the limit minus the free slots.
    static func expectConsistentSlots(_ payload: [UInt8], _ comment: Comment) {
        var free: UInt64 = 0
        var limit: UInt64 = 0
        var allocated = 0
        var reader = ProtobufReader(payload)
        do {
            while let (field, value) = try reader.next() {
                switch field {
                case 1: free = UInt64(try value.uint32(field: field))
                case 2: limit = UInt64(try value.uint32(field: field))
                case 3:
                    // Packed varints: one address per byte whose top bit is clear.
                    allocated += try value.bytes(field: field).filter { $0 & 0x80 == 0 }.count
                default: break
                }
            }
        } catch {
            Issue.record("malformed BluetoothConnectionsFreeResponse: \(error) (\(comment))")
        }
        #expect(
            limit >= free && UInt64(allocated) == limit - free, "free \(free) limit \(limit) allocated \(allocated)")
    }

    @Test func connectServeAndRelease() async throws {
        let harness = try await Harness(connectionSlots: 2) { FakeBackend(loop: $0) }
        let backend = try #require(harness.backend as? FakeBackend)
        var client = try TestClient(port: await harness.port)
        client = try Self.connected(&client)
        let flags = try Self.featureFlags(&client)
        #expect(flags & BluetoothProxyFeatures.activeConnections.rawValue != 0)
        #expect(flags & BluetoothProxyFeatures.remoteCaching.rawValue != 0)

        client.send(type: MessageType.subscribeBluetoothConnectionsFreeRequest)
        Self.expectNext(&client, .connectionsFree(free: 2, limit: 2, allocated: []), "2 of 2 free")
        let device: UInt64 = 0xA4C1_3800_0010
        // Not connected yet: GATT requests are refused with -1.
        client.send(type: MessageType.bluetoothGATTReadRequest, Self.gatt(device, 0x0B))
        Self.expectNext(&client, .gattError(address: device, handle: 0x0B, error: -1), "not connected")
        client.send(type: MessageType.bluetoothDeviceRequest, Self.deviceRequest(device, 5))  // V3 without cache
        Self.expectNext(&client, .connectionsFree(free: 1, limit: 2, allocated: [device]), "a slot taken")
        Self.expectNext(&client, .deviceConnection(address: device, connected: true, mtu: 247, error: 0), "connected")

        client.send(type: MessageType.bluetoothGATTGetServicesRequest, Self.gatt(device, 0))
        Self.expectNext(
            &client, .gattServices(address: device, services: ProxyGATTFixture.batteryService, shortUUIDs: false),
            "services")
        Self.expectNext(&client, .gattServicesDone(address: device), "services done")
        client.send(type: MessageType.bluetoothGATTReadRequest, Self.gatt(device, 0x0B))
        Self.expectNext(&client, .gattRead(address: device, handle: 0x0B, data: [0x57]), "read")
        client.send(type: MessageType.bluetoothGATTReadRequest, Self.gatt(device, 0x0C))
        Self.expectNext(&client, .gattError(address: device, handle: 0x0C, error: 0x80), "ATT error")
        client.send(
            type: MessageType.bluetoothGATTWriteRequest,
            Self.gatt(device, 0x0B) {
                $0.bool(3, true)
                $0.bytes(4, [1])
            })
        Self.expectNext(&client, .gattWriteDone(address: device, handle: 0x0B), "write with response")
        // Without response: no answer; the notify answer comes next.
        client.send(type: MessageType.bluetoothGATTWriteRequest, Self.gatt(device, 0x0B) { $0.bytes(4, [2]) })
        client.send(type: MessageType.bluetoothGATTNotifyRequest, Self.gatt(device, 0x0B) { $0.bool(3, true) })
        Self.expectNext(&client, .gattNotifyDone(address: device, handle: 0x0B), "notify on")
        _ = try await harness.loop.submit { [harness] in
            harness.server?.notification(address: device, handle: 0x0B, data: [0x58])
            harness.server?.notification(address: 0x1234, handle: 0x0B, data: [0x59])  // not connected: dropped
        }
        Self.expectNext(&client, .gattNotifyData(address: device, handle: 0x0B, data: [0x58]), "notification")

        // A second client cannot take the first one's device; the slots run out; an unknown device fails.
        var other = try TestClient(port: await harness.port)
        other = try Self.connected(&other)
        other.send(type: MessageType.bluetoothDeviceRequest, Self.deviceRequest(device, 4))
        Self.expectNext(&other, .deviceConnection(address: device, connected: false, mtu: 0, error: 0x85), "owned")
        other.send(type: MessageType.bluetoothGATTReadRequest, Self.gatt(device, 0x0B))
        Self.expectNext(&other, .gattError(address: device, handle: 0x0B, error: -1), "not its connection")
        other.send(type: MessageType.bluetoothDeviceRequest, Self.deviceRequest(backend.unknown, 4))
        Self.expectNext(
            &other, .deviceConnection(address: backend.unknown, connected: false, mtu: 0, error: 0x85), "unknown")
        other.send(type: MessageType.bluetoothDeviceRequest, Self.deviceRequest(0x22, 4))
        Self.expectNext(&other, .deviceConnection(address: 0x22, connected: true, mtu: 247, error: 0), "second slot")
        other.send(type: MessageType.bluetoothDeviceRequest, Self.deviceRequest(0x33, 4))
        Self.expectNext(&other, .deviceConnection(address: 0x33, connected: false, mtu: 0, error: 0x80), "no slot")
        // An address beyond 48 bits is refused without a slot.
        other.send(type: MessageType.bluetoothDeviceRequest, Self.deviceRequest(1 << 50, 4))
        Self.expectNext(&other, .deviceConnection(address: 1 << 50, connected: false, mtu: 0, error: 0x85), "48 bits")
        // The unknown device's failed attempt and the second slot were broadcast to the subscriber.
        Self.expectNext(
            &client, .connectionsFree(free: 0, limit: 2, allocated: [backend.unknown, device]), "attempt")
        Self.expectNext(&client, .connectionsFree(free: 1, limit: 2, allocated: [device]), "attempt failed")
        Self.expectNext(&client, .connectionsFree(free: 0, limit: 2, allocated: [0x22, device]), "second slot")

        // The link drops: the owner hears it, the slot is free.
        _ = try await harness.loop.submit { [harness] in harness.server?.connectionLost(address: device, error: 0x13) }
        Self.expectNext(&client, .deviceConnection(address: device, connected: false, mtu: 0, error: 0x13), "lost")
        Self.expectNext(&client, .connectionsFree(free: 1, limit: 2, allocated: [0x22]), "freed by the drop")
        // The other client leaves: its connection is disconnected and freed.
        other.close()
        Self.expectNext(&client, .connectionsFree(free: 2, limit: 2, allocated: []), "freed by the client leaving")
        #expect(backend.disconnected.withLock { $0 } == [0x22])
        let statistics = await harness.statistics()
        #expect(statistics.proxyConnections == 0)
        #expect(statistics.proxyConnects == 2)
        #expect(statistics.proxyConnectFailures == 4)  // owned, unknown, no slot, beyond 48 bits
        client.close()
        await harness.stop()
    }

    /// The budget shared with the gateway: the free count is the smaller of the proxy's own and
    /// the shared one, and the limit shrinks with it (the gateway's links are no proxy
    /// connections: allocated = limit - free, as bleak-esphome checks); a connect beyond the
    /// shared budget is refused with 0x80 at once though the proxy has slots; a change of the
    /// others' use is broadcast once.
    @Test func sharedBudget() async throws {
        let harness = try await Harness(connectionSlots: 2) { loop in
            let backend = FakeBackend(loop: loop)
            backend.sharedTotal = 2
            backend.othersUsed = 1  // the gateway's own link
            return backend
        }
        let backend = try #require(harness.backend as? FakeBackend)
        var client = try TestClient(port: await harness.port)
        client = try Self.connected(&client)
        client.send(type: MessageType.subscribeBluetoothConnectionsFreeRequest)
        Self.expectNext(&client, .connectionsFree(free: 1, limit: 1, allocated: []), "1: the gateway holds a slot")
        let first: UInt64 = 0xA4C1_3800_0011
        let second: UInt64 = 0xA4C1_3800_0012
        client.send(type: MessageType.bluetoothDeviceRequest, Self.deviceRequest(first, 4))
        Self.expectNext(&client, .connectionsFree(free: 0, limit: 1, allocated: [first]), "the last shared slot")
        Self.expectNext(&client, .deviceConnection(address: first, connected: true, mtu: 247, error: 0), "connected")
        client.send(type: MessageType.bluetoothDeviceRequest, Self.deviceRequest(second, 4))
        Self.expectNext(
            &client, .deviceConnection(address: second, connected: false, mtu: 0, error: 0x80),
            "refused at once: the proxy has a slot, the shared budget has none")
        // The gateway's link ends: one message, sent once however often it is reported.
        _ = try await harness.loop.submit { [harness] in
            backend.othersUsed = 0
            harness.server?.connectionSlotsChanged()
            harness.server?.connectionSlotsChanged()
        }
        Self.expectNext(&client, .connectionsFree(free: 1, limit: 2, allocated: [first]), "the gateway's slot back")
        client.send(type: MessageType.bluetoothDeviceRequest, Self.deviceRequest(second, 4))
        Self.expectNext(&client, .connectionsFree(free: 0, limit: 2, allocated: [first, second]), "second slot")
        Self.expectNext(&client, .deviceConnection(address: second, connected: true, mtu: 247, error: 0), "connected")
        // The gateway wants its slot again while both are taken: nothing changes for the client.
        _ = try await harness.loop.submit { [harness] in harness.server?.connectionSlotsChanged() }
        client.send(type: MessageType.bluetoothDeviceRequest, Self.deviceRequest(first, 1))
        Self.expectNext(&client, .deviceConnection(address: first, connected: false, mtu: 0, error: 0), "disconnect")
        Self.expectNext(&client, .connectionsFree(free: 1, limit: 2, allocated: [second]), "freed")
        #expect(await harness.statistics().proxyConnectFailures == 1)
        client.close()
        await harness.stop()
    }

    /// Pair, unpair and clear cache through the server: announced with connections; pairing only
    /// a device this client connected; unpair and clear cache refused for another client's
    /// connection; one request per device at a time; the backend's outcome answered.
    @Test func pairUnpairClearCache() async throws {
        let harness = try await Harness(connectionSlots: 2) { FakeBackend(loop: $0) }
        let backend = try #require(harness.backend as? FakeBackend)
        var client = try TestClient(port: await harness.port)
        client = try Self.connected(&client)
        let flags = try Self.featureFlags(&client)
        #expect(flags & BluetoothProxyFeatures.pairing.rawValue != 0)
        #expect(flags & BluetoothProxyFeatures.cacheClearing.rawValue != 0)

        let device: UInt64 = 0xA4C1_3800_0010
        client.send(type: MessageType.bluetoothDeviceRequest, Self.deviceRequest(device, 2))
        Self.expectNext(&client, .devicePairing(address: device, paired: false, error: -1), "pair: not connected")
        client.send(type: MessageType.bluetoothDeviceRequest, Self.deviceRequest(device, 4))
        Self.expectNext(&client, .deviceConnection(address: device, connected: true, mtu: 247, error: 0), "connected")
        client.send(type: MessageType.bluetoothDeviceRequest, Self.deviceRequest(device, 2))
        Self.expectNext(&client, .devicePairing(address: device, paired: true, error: 0), "paired")

        // Another client may not unpair or clear the cache of this client's device.
        var other = try TestClient(port: await harness.port)
        other = try Self.connected(&other)
        other.send(type: MessageType.bluetoothDeviceRequest, Self.deviceRequest(device, 3))
        Self.expectNext(&other, .deviceUnpairing(address: device, success: false, error: 0x82), "another's link")
        other.send(type: MessageType.bluetoothDeviceRequest, Self.deviceRequest(device, 6))
        Self.expectNext(&other, .deviceClearCache(address: device, success: false, error: 0x82), "another's link")
        // Any other device: the backend answers.
        other.send(type: MessageType.bluetoothDeviceRequest, Self.deviceRequest(backend.paired, 6))
        Self.expectNext(
            &other, .deviceClearCache(address: backend.paired, success: false, error: 0x82), "paired: refused")
        other.send(type: MessageType.bluetoothDeviceRequest, Self.deviceRequest(0x22, 6))
        Self.expectNext(&other, .deviceClearCache(address: 0x22, success: true, error: 0), "cleared")
        other.send(type: MessageType.bluetoothDeviceRequest, Self.deviceRequest(0x22, 3))
        Self.expectNext(&other, .deviceUnpairing(address: 0x22, success: true, error: 0), "unpaired")
        client.send(type: MessageType.bluetoothDeviceRequest, Self.deviceRequest(device, 3))
        Self.expectNext(&client, .deviceUnpairing(address: device, success: true, error: 0), "its own device")

        // One request per device at a time; a 48-bit address only.
        backend.hold = true
        other.send(type: MessageType.bluetoothDeviceRequest, Self.deviceRequest(0x33, 6))
        other.send(type: MessageType.bluetoothDeviceRequest, Self.deviceRequest(0x33, 3))
        Self.expectNext(&other, .deviceUnpairing(address: 0x33, success: false, error: 0x84), "busy")
        other.send(type: MessageType.bluetoothDeviceRequest, Self.deviceRequest(1 << 50, 3))
        Self.expectNext(&other, .deviceUnpairing(address: 1 << 50, success: false, error: 0x85), "48 bits")
        _ = try await harness.loop.submit { for answer in backend.heldDeviceAnswers { answer() } }
        Self.expectNext(&other, .deviceClearCache(address: 0x33, success: true, error: 0), "the held answer")
        #expect(
            backend.deviceRequests.withLock { $0 } == [
                "pair \(device)", "clear cache \(backend.paired)", "clear cache 34", "unpair 34", "unpair \(device)",
                "clear cache 51",
            ])
        client.close()
        other.close()
        await harness.stop()
    }

    /// BluetoothSetConnectionParamsRequest: only the client that owns the link may set its
    /// parameters (anyone else, or a device not connected: -1, ESPHome's not connected); values
    /// outside the Core spec's ranges are refused with ESP_ERR_INVALID_ARG before the backend
    /// hears of them; valid ones get the backend's answer. The feature flag is not announced.
    @Test func connectionParameters() async throws {
        let harness = try await Harness(connectionSlots: 2) { FakeBackend(loop: $0) }
        let backend = try #require(harness.backend as? FakeBackend)
        var client = try TestClient(port: await harness.port)
        client = try Self.connected(&client)
        let flags = try Self.featureFlags(&client)
        #expect(flags & BluetoothProxyFeatures.connectionParams.rawValue == 0)

        func request(_ address: UInt64, _ values: (UInt32, UInt32, UInt32, UInt32)) -> [UInt8] {
            var writer = ProtobufWriter()
            writer.varint(1, address)
            writer.uint32(2, values.0)
            writer.uint32(3, values.1)
            writer.uint32(4, values.2)
            writer.uint32(5, values.3)
            return writer.bytes
        }
        let device: UInt64 = 0xA4C1_3800_0040
        let fast = (UInt32(6), UInt32(12), UInt32(0), UInt32(400))
        client.send(type: MessageType.bluetoothSetConnectionParamsRequest, request(device, fast))
        Self.expectNext(&client, .connectionParams(address: device, error: -1), "not connected")
        client.send(type: MessageType.bluetoothDeviceRequest, Self.deviceRequest(device, 4))
        Self.expectNext(&client, .deviceConnection(address: device, connected: true, mtu: 247, error: 0), "connected")
        client.send(type: MessageType.bluetoothSetConnectionParamsRequest, request(device, fast))
        Self.expectNext(&client, .connectionParams(address: device, error: 0), "the owner's link")

        // Outside the Core spec: interval below 7.5 ms or above 4 s, min > max, latency over 499,
        // timeout outside 100 ms–32 s, timeout not longer than (1 + latency) · max · 2.
        let invalid: [(UInt32, UInt32, UInt32, UInt32)] = [
            (5, 12, 0, 400), (6, 3201, 0, 400), (12, 6, 0, 400), (6, 12, 500, 3200), (6, 12, 0, 9),
            (6, 12, 0, 3201), (6, 80, 0, 20), (6, 40, 4, 50), (6, 12, 0, 70_000), (1 << 20, 12, 0, 400),
        ]
        for values in invalid {
            client.send(type: MessageType.bluetoothSetConnectionParamsRequest, request(device, values))
            Self.expectNext(&client, .connectionParams(address: device, error: 0x102), "invalid: \(values)")
        }
        // The smallest timeout above the bound: (1 + 4) · 40 · 1.25 ms · 2 = 500 ms < 510 ms.
        client.send(type: MessageType.bluetoothSetConnectionParamsRequest, request(device, (6, 40, 4, 51)))
        Self.expectNext(&client, .connectionParams(address: device, error: 0), "just long enough")

        // Another client may not set the parameters of this client's link.
        var other = try TestClient(port: await harness.port)
        other = try Self.connected(&other)
        other.send(type: MessageType.bluetoothSetConnectionParamsRequest, request(device, fast))
        Self.expectNext(&other, .connectionParams(address: device, error: -1), "another's link")
        #expect(
            backend.parameterRequests.withLock { $0 } == [
                "\(device): interval 7.5–15 ms, latency 0, supervision timeout 4000 ms",
                "\(device): interval 7.5–50 ms, latency 4, supervision timeout 510 ms",
            ])
        client.close()
        other.close()
        await harness.stop()
    }

    /// The connect requests of the current API, as ESPHome answers them: V3 with and without
    /// cache carry the address type to the backend; the deprecated V1 connect and a V3 connect
    /// without an address type are answered `connected: false` with error 0 at once, no slot
    /// taken, no connect started (ESPHome: "V1 connections removed", "Missing address type").
    @Test func connectRequestForms() async throws {
        let harness = try await Harness(connectionSlots: 2) { FakeBackend(loop: $0) }
        let backend = try #require(harness.backend as? FakeBackend)
        var client = try TestClient(port: await harness.port)
        client = try Self.connected(&client)
        client.send(type: MessageType.subscribeBluetoothConnectionsFreeRequest)
        Self.expectNext(&client, .connectionsFree(free: 2, limit: 2, allocated: []), "2 of 2 free")
        let old: UInt64 = 0xA4C1_3800_0040
        client.send(type: MessageType.bluetoothDeviceRequest, Self.deviceRequest(old, 0))
        Self.expectNext(&client, .deviceConnection(address: old, connected: false, mtu: 0, error: 0), "V1 refused")
        client.send(type: MessageType.bluetoothDeviceRequest, Self.deviceRequest(old, 4, addressType: nil))
        Self.expectNext(
            &client, .deviceConnection(address: old, connected: false, mtu: 0, error: 0), "no address type")
        client.send(type: MessageType.bluetoothDeviceRequest, Self.deviceRequest(old, 5, addressType: nil))
        Self.expectNext(
            &client, .deviceConnection(address: old, connected: false, mtu: 0, error: 0), "no address type either")
        // A random-address device with cache, a public one without: both connect, with their type.
        let random: UInt64 = 0xC0FF_EE00_0041
        let publicDevice: UInt64 = 0xA4C1_3800_0042
        client.send(type: MessageType.bluetoothDeviceRequest, Self.deviceRequest(random, 4, addressType: 1))
        Self.expectNext(&client, .connectionsFree(free: 1, limit: 2, allocated: [random]), "a slot taken")
        Self.expectNext(&client, .deviceConnection(address: random, connected: true, mtu: 247, error: 0), "random")
        client.send(type: MessageType.bluetoothDeviceRequest, Self.deviceRequest(publicDevice, 5, addressType: 0))
        Self.expectNext(&client, .connectionsFree(free: 0, limit: 2, allocated: [publicDevice, random]), "both slots")
        Self.expectNext(
            &client, .deviceConnection(address: publicDevice, connected: true, mtu: 247, error: 0), "public")
        #expect(backend.connects.withLock { $0 } == ["\(random) type 1", "\(publicDevice) type 0"])
        // The refused forms took no slot and counted no failure of a connect that was never tried.
        let statistics = await harness.statistics()
        #expect(statistics.proxyConnects == 2)
        #expect(statistics.proxyConnectFailures == 0)
        #expect(harness.lines.withLock { $0.contains { $0.contains("deprecated connect (V1)") } })
        #expect(harness.lines.withLock { $0.contains { $0.contains("without an address type refused") } })
        client.close()
        await harness.stop()
    }

    @Test func sessionRoutesRequestsOnlyWhenServed() throws {
        func frame(_ type: UInt16, _ payload: [UInt8] = []) -> [UInt8] {
            PlaintextFrameDecoder.encode(ServerMessage(type: type, payload: payload))
        }
        let input =
            frame(MessageType.helloRequest, APIServerTests.hello())
            + frame(MessageType.subscribeBluetoothConnectionsFreeRequest)
            + [0, 4, 5, 1, 2, 3, 6].flatMap { frame(MessageType.bluetoothDeviceRequest, Self.deviceRequest(7, $0)) }
            + frame(MessageType.bluetoothGATTReadRequest, Self.gatt(7, 0x0B))
        let connections: BluetoothProxyFeatures = [.activeConnections]
        for features in [[], connections, connections.union([.pairing, .cacheClearing])] {
            let served = !features.isEmpty
            var configuration = APIServerConfiguration(
                host: "127.0.0.1", port: 0, encryption: .plaintext, name: "t", friendlyName: "t",
                macAddress: "AA:BB:CC:DD:EE:FF", bluetoothMacAddress: "AA:BB:CC:DD:EE:FF", version: "t",
                maxClients: 1, connectionSlots: 2)
            configuration.features.formUnion(features)
            var session = APISession(configuration: configuration)
            let outcome = session.receive(input, scanner: ScannerStatus(state: .running, mode: .active))
            #expect(outcome.failure == nil)
            var decoder = PlaintextFrameDecoder(maxPayload: 1 << 16)
            decoder.append(session.outgoing[...])
            var answers: [UInt16] = []
            while let message = try decoder.next() { answers.append(message.type) }
            // The deprecated connect (0) is refused by the session, as ESPHome refuses it.
            let connectionRequests: [APISession.ProxyRequest] = [
                .subscribeConnectionsFree, .connect(address: 7, addressType: 0), .connect(address: 7, addressType: 0),
                .disconnect(address: 7),
            ]
            if features.contains(.pairing) {
                #expect(
                    outcome.proxyRequests
                        == connectionRequests + [
                            .pair(address: 7), .unpair(address: 7), .clearCache(address: 7),
                            .gatt(.read(address: 7, handle: 0x0B)),
                        ])
                #expect(answers == [MessageType.helloResponse, MessageType.bluetoothDeviceConnectionResponse])
            } else if served {
                #expect(outcome.proxyRequests == connectionRequests + [.gatt(.read(address: 7, handle: 0x0B))])
                // Pair, unpair and clear cache not announced: refused by the session itself.
                #expect(
                    answers == [
                        MessageType.helloResponse, MessageType.bluetoothDeviceConnectionResponse,
                        MessageType.bluetoothDevicePairingResponse, MessageType.bluetoothDeviceUnpairingResponse,
                        MessageType.bluetoothDeviceClearCacheResponse,
                    ])
            } else {
                #expect(outcome.proxyRequests.isEmpty)
                #expect(answers.count == 1 + 1 + 7 + 1)  // hello, connections free, 7 device answers, GATT error
            }
        }
    }

    /// Hostile clients in any order: random connects, disconnects, GATT requests and clients
    /// leaving, from three clients at once. The slots are never exceeded, every connection has a
    /// live owner, and when everyone is gone every slot is free again.
    @Test func randomRequestsKeepTheSlotsBounded() async throws {
        let harness = try await Harness(connectionSlots: 2) { FakeBackend(loop: $0) }
        let backend = try #require(harness.backend as? FakeBackend)
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func random(_ bound: Int) -> Int {  // SplitMix64, seeded: the same sequence every run
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return Int(truncatingIfNeeded: (z ^ (z >> 31)) % UInt64(bound))
        }
        var clients: [TestClient] = []
        for _ in 0..<3 {
            var client = try TestClient(port: await harness.port)
            client = try Self.connected(&client)
            client.send(type: MessageType.subscribeBluetoothConnectionsFreeRequest)
            clients.append(client)
        }
        let addresses: [UInt64] = [1, 2, 3, 4, backend.unknown, 1 << 49]
        for round in 0..<300 {
            let index = random(clients.count)
            let address = addresses[random(addresses.count)]
            switch random(10) {
            case 0...3:
                clients[index].send(
                    type: MessageType.bluetoothDeviceRequest, Self.deviceRequest(address, UInt32(random(8))))
            case 4...7:
                let types = [
                    MessageType.bluetoothGATTGetServicesRequest, MessageType.bluetoothGATTReadRequest,
                    MessageType.bluetoothGATTWriteRequest, MessageType.bluetoothGATTReadDescriptorRequest,
                    MessageType.bluetoothGATTWriteDescriptorRequest, MessageType.bluetoothGATTNotifyRequest,
                ]
                clients[index].send(
                    type: types[random(types.count)], Self.gatt(address, UInt16(truncatingIfNeeded: random(65536))))
            case 8:
                _ = try await harness.loop.submit { [harness] in
                    harness.server?.connectionLost(address: address, error: 0x08)
                    harness.server?.notification(address: address, handle: 0x0B, data: [1])
                }
            default:
                clients[index].close()
                // The server notices the close on its own loop turn; until then the old client
                // still counts against max_clients, and on a loaded machine several closes in a
                // row could leave no room for their replacements.
                for _ in 0..<500 where await harness.statistics().clients >= clients.count {
                    try await Task.sleep(for: .milliseconds(10))
                }
                var client = try TestClient(port: await harness.port)
                client = try Self.connected(&client)
                clients[index] = client
            }
            if round % 10 == 9 {
                try await Task.sleep(for: .milliseconds(5))
                let addressesNow = try await harness.loop.submit { [harness] in harness.server?.proxiedAddresses ?? [] }
                #expect(addressesNow.count <= 2, "round \(round): \(addressesNow)")
                #expect(!addressesNow.contains(1 << 49))
            }
        }
        for client in clients { client.close() }
        var remaining: [UInt64] = [0]
        for _ in 0..<100 where !remaining.isEmpty {
            try await Task.sleep(for: .milliseconds(10))
            remaining = try await harness.loop.submit { [harness] in harness.server?.proxiedAddresses ?? [] }
        }
        #expect(remaining.isEmpty)
        let statistics = await harness.statistics()
        #expect(statistics.proxyConnections == 0)
        // The sequence did exercise both: connections made and connects refused.
        #expect(statistics.proxyConnects > 5 && statistics.proxyConnectFailures > 5, "\(statistics)")
        await harness.stop()
    }

    /// A bulk transfer (writes without response, as a firmware update sends them) faster than
    /// the device takes them: every write reaches the device, in order; the backend never has
    /// more than ``APIServer/maxInFlight`` at once and the server holds at most one read's worth
    /// of requests (it stops reading the client instead); a second client's advertisements keep
    /// coming meanwhile.
    @Test func floodingClientIsHeldBack() async throws {
        let harness = try await Harness(connectionSlots: 1) { FakeBackend(loop: $0) }
        let backend = try #require(harness.backend as? FakeBackend)
        _ = try await harness.loop.submit { backend.writeTime = 0.002 }
        var client = try TestClient(port: await harness.port)
        client = try Self.connected(&client)
        var watcher = try TestClient(port: await harness.port)
        watcher = try Self.connected(&watcher)
        watcher.send(type: MessageType.subscribeBluetoothLEAdvertisementsRequest, [0x08, 0x01])
        #expect(watcher.receive()?.type == MessageType.bluetoothScannerStateResponse)
        let device: UInt64 = 0x42
        client.send(type: MessageType.bluetoothDeviceRequest, Self.deviceRequest(device, 5))
        Self.expectNext(&client, .deviceConnection(address: device, connected: true, mtu: 247, error: 0), "connected")
        // 1,000 writes of 244 bytes (a 247-byte MTU), each numbered, sent as fast as TCP takes them.
        let chunks = (0..<1_000).map { index in (0..<244).map { UInt8(truncatingIfNeeded: index &* 7 &+ $0) } }
        let fd = client.fd
        let sending = Task.detached {
            for chunk in chunks {
                let request = Self.gatt(device, 0x0B) { $0.bytes(4, chunk) }
                let frame = PlaintextFrameDecoder.encode(
                    ServerMessage(type: MessageType.bluetoothGATTWriteRequest, payload: request))
                _ = frame.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            }
        }
        // An advertisement every 20 ms while the writes drain (2 s at least: a stall that long fails): each reaches the
        // watcher, and the server's held requests stay within one read (4,096 bytes) and a frame.
        let advertisement = ServerMessage.RawAdvertisement(
            address: 0xA4C1_380B_1234, rssi: -70, addressType: 0, data: [0x02, 0x01, 0x06])
        var slowest: UInt64 = 0
        var mostHeld = 0
        var rounds = 0
        while try await harness.loop.submit({ backend.written.count }) < chunks.count, rounds < 1_500 {
            rounds += 1
            let start = EventLoop.now()
            await harness.forward(advertisement)
            let received = watcher.receive()
            #expect(received?.type == MessageType.bluetoothLERawAdvertisementsResponse)
            slowest = max(slowest, EventLoop.now() - start)
            mostHeld = max(mostHeld, try await harness.loop.submit { harness.server?.heldRequests ?? 0 })
            try await Task.sleep(for: .milliseconds(20))
        }
        await sending.value
        let (written, most) = try await harness.loop.submit { (backend.written, backend.mostWritesInFlight) }
        #expect(written == chunks, "every write arrived, in order (\(written.count) of \(chunks.count))")
        #expect(most <= APIServer.maxInFlight)
        #expect(mostHeld * 244 <= 4_096 + 1_024 + 244, "held \(mostHeld) requests")
        #expect(rounds > 10, "the transfer took \(rounds) rounds")
        #expect(await harness.statistics().heldBack > 0, "the socket was left unread at times")
        #expect(slowest < 1_000_000_000, "an advertisement took \(Double(slowest) / 1e6) ms to reach the watcher")
        client.close()
        watcher.close()
        await harness.stop()
    }

    @Test func inFlightRequestsAreBounded() async throws {
        let harness = try await Harness(connectionSlots: 1) { FakeBackend(loop: $0) }
        let backend = try #require(harness.backend as? FakeBackend)
        var client = try TestClient(port: await harness.port)
        client = try Self.connected(&client)
        let device: UInt64 = 0x42
        client.send(type: MessageType.bluetoothDeviceRequest, Self.deviceRequest(device, 5))
        Self.expectNext(&client, .deviceConnection(address: device, connected: true, mtu: 247, error: 0), "connected")
        _ = try await harness.loop.submit { backend.hold = true }
        // One beyond the bound waits (no error), and so does what the client sends after it.
        /// 16 reads at the backend and `waiting` held by the server, within 10 s.
        func settled(waiting: Int) async throws -> Bool {
            for _ in 0..<1_000 {
                let (atBackend, held) = try await harness.loop.submit {
                    (backend.held.count, harness.server?.heldRequests ?? 0)
                }
                if atBackend == APIServer.maxInFlight, held == waiting { return true }
                try await Task.sleep(for: .milliseconds(10))
            }
            return false
        }
        for _ in 0...APIServer.maxInFlight {
            client.send(type: MessageType.bluetoothGATTReadRequest, Self.gatt(device, 0x0B))
        }
        #expect(try await settled(waiting: 1), "16 at the backend, the read beyond the bound held")
        // Not read while a request waits: 0x0C stays in the socket.
        client.send(type: MessageType.bluetoothGATTReadRequest, Self.gatt(device, 0x0C))
        try await Task.sleep(for: .milliseconds(200))
        #expect(try await harness.loop.submit { harness.server?.heldRequests } == 1)
        // One answer: the waiting read goes to the backend, the socket is read again (0x0C waits).
        _ = try await harness.loop.submit { backend.held.removeFirst()(.success([1])) }
        Self.expectNext(&client, .gattRead(address: device, handle: 0x0B, data: [1]), "the first answer")
        #expect(try await settled(waiting: 1), "the held read at the backend, 0x0C held")
        // Disconnected meanwhile: the late completions are dropped, the client gets the disconnect.
        client.send(type: MessageType.bluetoothDeviceRequest, Self.deviceRequest(device, 1))
        try await Task.sleep(for: .milliseconds(100))
        _ = try await harness.loop.submit {
            let held = backend.held
            backend.held.removeAll()
            backend.hold = false
            for done in held { done(.success([1])) }
        }
        // The first answer makes room: 0x0C goes to the backend and the socket is read again,
        // so the disconnect comes after the 16 answers (0x0C's may come before it or be dropped).
        var answers = 0
        while let message = client.receive(), message.type != MessageType.bluetoothDeviceConnectionResponse {
            if message.type == MessageType.bluetoothGATTReadResponse { answers += 1 }
        }
        #expect(answers == APIServer.maxInFlight)
        client.send(type: MessageType.pingRequest)
        #expect(client.receive()?.type == MessageType.pingResponse)
        #expect(backend.disconnected.withLock { $0 } == [device])
        client.close()
        await harness.stop()
    }
}
