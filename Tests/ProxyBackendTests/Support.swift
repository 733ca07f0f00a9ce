import Bluetooth
import ESPHomeAPI
import EventLoop
import Gateway
import GatewayFakes
import JSON
import ProxyBackend
import Synchronization
import TestSupport
import Testing

/// The proxy's port in memory: devices with a few handles, links, notifications; records the
/// connects and disconnects the backend's jobs make. Links the gateway's own fake port
/// (`gatewayBLE`) has up count as up here too (one radio): a connect to such a device is adopted.
/// Deliveries (a link lost, a notification value) reach the backend on the loop thread, as the
/// central's do.
final class FakeProxyBLE: ProxyBLE {
    /// A characteristic or descriptor: the device and the handle.
    struct Attribute: Sendable {
        let address: BluetoothAddress
        let handle: UInt16
    }
    /// A descriptor (a type of its own: the port tells the two apart by type).
    struct DescriptorAttribute: Sendable {
        let attribute: Attribute
    }
    typealias Characteristic = Attribute
    typealias Descriptor = DescriptorAttribute
    typealias Subscription = Int
    typealias LinkEvents = Int

    private struct State {
        var known: Set<BluetoothAddress> = []
        var links: Set<BluetoothAddress> = []
        var connects: [BluetoothAddress] = []
        var disconnects: [BluetoothAddress] = []
        var lost: (@Sendable (BluetoothAddress) -> Void)?
        var subscriptions: [Int: (address: BluetoothAddress, handle: UInt16, deliver: @Sendable ([UInt8]) -> Void)] =
            [:]
        var nextSubscription = 0
        var reads: [UInt16: [UInt8]] = [0x0B: [73]]
        var removed: [BluetoothAddress] = []
    }

    private let state = Mutex(State())
    let loop: EventLoop
    let gatewayBLE: InMemoryBLE
    /// Disconnects wait here (open by default); a cancelled wait leaves the link as it is.
    let disconnectGate = Gate()

    init(loop: EventLoop, gatewayBLE: InMemoryBLE) {
        self.loop = loop
        self.gatewayBLE = gatewayBLE
    }

    func add(_ address: BluetoothAddress) { state.withLock { _ = $0.known.insert(address) } }
    var connects: [BluetoothAddress] { state.withLock { $0.connects } }
    var disconnects: [BluetoothAddress] { state.withLock { $0.disconnects } }
    var subscriptionCount: Int { state.withLock { $0.subscriptions.count } }

    /// The device drops the link the proxy made.
    func dropLink(_ address: BluetoothAddress) {
        let lost = state.withLock { state in
            state.links.remove(address)
            state.subscriptions = state.subscriptions.filter { $0.value.address != address }
            return state.lost
        }
        loop.execute { lost?(address) }
    }

    /// The device notifies a value of `handle`.
    func notify(_ address: BluetoothAddress, _ handle: UInt16, _ value: [UInt8]) {
        let targets = state.withLock { state in
            state.subscriptions.values.filter { $0.address == address && $0.handle == handle }.map(\.deliver)
        }
        loop.execute { for deliver in targets { deliver(value) } }
    }

    func isKnown(_ address: BluetoothAddress) -> Bool { state.withLock { $0.known.contains(address) } }

    func isConnected(_ address: BluetoothAddress) -> Bool {
        state.withLock { $0.links.contains(address) } || gatewayBLE.isConnected(address)
    }

    func linkEvents(_ lost: @escaping @Sendable (BluetoothAddress) -> Void) async -> Int {
        state.withLock { $0.lost = lost }
        return 1
    }

    func stopLinkEvents(_ events: Int) async { state.withLock { $0.lost = nil } }

    func connect(_ address: BluetoothAddress) async throws(ProxyFailure) -> ProxyGATT<Attribute, DescriptorAttribute> {
        let adopted = gatewayBLE.isConnected(address)
        state.withLock { state in
            state.connects.append(address)
            if !adopted { state.links.insert(address) }
        }
        return ProxyGATT(
            adopted: adopted, mtu: 517, services: ProxyGATTFixture.batteryService,
            characteristics: [0x0B: Attribute(address: address, handle: 0x0B)],
            descriptors: [0x0D: DescriptorAttribute(attribute: Attribute(address: address, handle: 0x0D))])
    }

    func disconnect(_ address: BluetoothAddress) async {
        state.withLock { $0.disconnects.append(address) }
        await disconnectGate.wait()
        if Task.isCancelled { return }
        state.withLock { state in
            state.links.remove(address)
            state.subscriptions = state.subscriptions.filter { $0.value.address != address }
        }
    }

    func read(_ characteristic: Attribute) async throws(ProxyFailure) -> [UInt8] {
        guard let value = state.withLock({ $0.reads[characteristic.handle] }) else { throw ProxyFailure(0x02) }
        return value
    }

    func read(_ descriptor: DescriptorAttribute) async throws(ProxyFailure) -> [UInt8] { [0, 0] }
    func write(_ data: [UInt8], to characteristic: Attribute, withResponse: Bool) async throws(ProxyFailure) {}
    func write(_ data: [UInt8], to descriptor: DescriptorAttribute) async throws(ProxyFailure) {}

    func notifications(of characteristic: Attribute, _ deliver: @escaping @Sendable ([UInt8]) -> Void)
        async throws(ProxyFailure) -> Int
    {
        state.withLock { state in
            state.nextSubscription += 1
            state.subscriptions[state.nextSubscription] = (characteristic.address, characteristic.handle, deliver)
            return state.nextSubscription
        }
    }

    func endNotifications(_ subscription: Int) {
        state.withLock { _ = $0.subscriptions.removeValue(forKey: subscription) }
    }
    func pair(_ address: BluetoothAddress) async throws(ProxyFailure) {}
    func isPaired(_ address: BluetoothAddress) async throws(ProxyFailure) -> Bool { false }

    /// Forgets the device: its link ends (without a link event: the backend reports it itself).
    func removeDevice(_ address: BluetoothAddress) async throws(ProxyFailure) {
        state.withLock { state in
            state.removed.append(address)
            state.known.remove(address)
            state.links.remove(address)
        }
    }

    var removed: [BluetoothAddress] { state.withLock { $0.removed } }
}

/// The server's side as the backend sees it: records what it is told.
final class RecordingServer: ProxyEvents {
    private struct State {
        var lost: [(address: UInt64, error: Int32)] = []
        var notifications: [(address: UInt64, handle: UInt16, data: [UInt8])] = []
        var slotsChanged = 0
        var statistics = APIServerStatistics()
    }

    private let state = Mutex(State())

    var lost: [(address: UInt64, error: Int32)] { state.withLock { $0.lost } }
    var notifications: [(address: UInt64, handle: UInt16, data: [UInt8])] { state.withLock { $0.notifications } }
    var slotsChanged: Int { state.withLock { $0.slotsChanged } }

    func setStatistics(_ change: (inout APIServerStatistics) -> Void) { state.withLock { change(&$0.statistics) } }

    func connectionLost(address: UInt64, error: Int32) { state.withLock { $0.lost.append((address, error)) } }
    func notification(address: UInt64, handle: UInt16, data: [UInt8]) {
        state.withLock { $0.notifications.append((address, handle, data)) }
    }
    func connectionSlotsChanged() { state.withLock { $0.slotsChanged += 1 } }
    var statistics: APIServerStatistics { state.withLock { $0.statistics } }
}

/// What the server was told by the backend's completions.
final class Answers: Sendable {
    private let state = Mutex<[String]>([])
    var all: [String] { state.withLock { $0 } }
    func add(_ line: String) { state.withLock { $0.append(line) } }
}

/// A real gateway with the core's fake ports and a manual clock on a loop of its own, and the
/// proxy's backend attached to it over ``FakeProxyBLE``, reporting to a ``RecordingServer``.
/// The backend is called as the ESPHome server calls it: on the loop thread.
final class ProxyHarness {
    let loop = EventLoop(name: "proxy-test")
    let ble = InMemoryBLE()
    let mqtt = InMemoryMQTT()
    let clock = ManualClock(wallMilliseconds: 1_796_058_000_000)
    let proxyBLE: FakeProxyBLE
    let server = RecordingServer()
    let answers = Answers()
    let backend: ProxyBackend<FakeProxyBLE>
    let gateway: Gateway
    private var jobs: Task<Void, Never>?

    init(maxConnections: Int, gatewayDevices: String = "", health: Bool = false) throws {
        let text = """
            {"homeassistant": {"enabled": false}, "health": {"enabled": \(health)},
             "bluetooth": {"max_connections": \(maxConnections)},
             "devices": [\(gatewayDevices)]}
            """
        let config = try GatewayConfig.parse(Array(text.utf8))
        mqtt.loop = loop
        proxyBLE = FakeProxyBLE(loop: loop, gatewayBLE: ble)
        backend = ProxyBackend(ble: proxyBLE, loop: loop)
        gateway = Gateway(
            config: config, ble: ble, mqtt: mqtt, clock: clock, loop: loop,
            reconnect: { FixedReconnectDelay(delay: 5) }, processSample: { nil }, attachment: backend)
    }

    deinit {
        jobs?.cancel()
        loop.shutdown()
    }

    func start() async throws {
        let gateway = self.gateway
        jobs = Task(executorPreference: loop.taskExecutor) { await gateway.run() }
        try await gateway.start()
        await backend.serve(server)
        await backend.start()
        await loop.settle()
    }

    /// Ends the core's jobs, as `gattway run`'s stop does first.
    func endJobs() async {
        jobs?.cancel()
        await jobs?.value
        await loop.settle()
    }

    /// The server's connect: the shared slot first (refused at once when none is free), then the
    /// connect; the answer is recorded as "connected <mtu>" or "failed <code>".
    @discardableResult
    func connect(_ address: BluetoothAddress) async throws -> Bool {
        let backend = self.backend
        let answers = self.answers
        let reserved = try await loop.submit {
            guard backend.reserveSlot(address: address.rawValue) else { return false }
            backend.connect(address: address.rawValue, addressType: 0) { result in
                switch result {
                case .success(let mtu): answers.add("connected \(mtu)")
                case .failure(let failure): answers.add("failed \(failure.code)")
                }
            }
            return true
        }
        await loop.settle()
        return reserved
    }

    func disconnect(_ address: BluetoothAddress) async throws {
        let backend = self.backend
        try await loop.submit { backend.disconnect(address: address.rawValue) }
        await loop.settle()
    }

    /// Starts with the gateway holding a link to `held` (a device its rule connects); `held` and
    /// `other` are devices the proxy can connect too.
    func startHolding(_ held: BluetoothAddress, proxyAlso other: BluetoothAddress) async throws {
        ble.add(held, .init(characteristics: []))
        proxyBLE.add(held)
        proxyBLE.add(other)
        try await start()
        await gateway.handle(BLEDiscovery(address: held, advertisement: .init(rssi: -50)))
        await gateway.waitUntilIdle()
    }

    /// Starts with `address` connected through the proxy and then its disconnect under way, held
    /// at the disconnect gate (which the test opens).
    func startDisconnecting(_ address: BluetoothAddress) async throws {
        proxyBLE.add(address)
        try await start()
        #expect(try await connect(address))
        proxyBLE.disconnectGate.close()
        try await disconnect(address)
    }

    func notify(_ address: BluetoothAddress, handle: UInt16) async throws {
        let backend = self.backend
        let answers = self.answers
        try await loop.submit {
            backend.notify(address: address.rawValue, handle: handle, enable: true) { failure in
                answers.add("notify \(failure?.code ?? 0)")
            }
        }
        await loop.settle()
    }

    func read(_ address: BluetoothAddress, handle: UInt16) async throws {
        let backend = self.backend
        let answers = self.answers
        try await loop.submit {
            backend.read(address: address.rawValue, handle: handle, descriptor: false) { result in
                switch result {
                case .success(let value): answers.add("read \(value)")
                case .failure(let failure): answers.add("read failed \(failure.code)")
                }
            }
        }
        await loop.settle()
    }

    func clearCache(_ address: BluetoothAddress) async throws {
        let backend = self.backend
        let answers = self.answers
        try await loop.submit {
            backend.clearCache(address: address.rawValue) { failure in answers.add("clear cache \(failure?.code ?? 0)")
            }
        }
        await loop.settle()
    }

    /// The shared free slots as the server reads them.
    var sharedFreeSlots: Int? {
        get async throws {
            let backend = self.backend
            return try await loop.submit { backend.sharedFreeSlots }
        }
    }
}
