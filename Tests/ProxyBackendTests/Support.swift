import Bluetooth
import ESPHomeAPI
import EventLoop
import Gateway
import GatewayFakes
import JSON
import ProxyBackend
import Synchronization
import Testing

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
