import Bluetooth
import ESPHomeAPI
import EventLoop
import Gateway
import GatewayFakes
import ProxyBackend
import Synchronization

extension FuzzTargets {
    /// The Bluetooth proxy's backend as a Home Assistant client drives it through the ESPHome API
    /// server: a hostile order of connects, disconnects, service listings, reads, writes and
    /// notification switches of any handle, pairing, unpairing and cache clearing, for known and
    /// unknown devices, passed on as the server passes them (``ServerModel``: a slot reserved
    /// before a connect, one connection per device, GATT and pairing only on a connection up,
    /// one pairing request per device at a time) — interleaved with
    /// the radio's side (links that drop, values notified) and a gateway device the core's own
    /// rule connects, whose link the proxy shares. A real ``ProxyBackend`` attached to a real
    /// ``Gateway`` on the fuzz loop, over the proxy tests' in-memory port (``FakeProxyBLE``).
    ///
    /// Properties: no trap, no hang; every request is answered exactly once once the loop
    /// settled; the shared free slots stay within `0...max_connections`; after the client
    /// disconnected every device, the slots the proxy took are free again (but the gateway's own
    /// link's) and no notification subscription is left.
    static let proxyBackend = FuzzTarget(
        name: "proxy-backend",
        summary: "a hostile order of Bluetooth proxy requests and radio events into ProxyBackend on the core",
        seeds: { ProxyBackendFuzz.seeds },
        run: { ProxyBackendFuzz.run($0) })
}

/// The driver of ``FuzzTargets/proxyBackend``.
///
/// Encoding: `max_connections` (a byte: 1–3), then up to ``maxSteps`` steps of an op byte, a
/// device (a byte into ``pool``: three devices the central knows, the gateway's device, one it
/// does not know) and the op's operands: 0 connect, 1 disconnect, 2 services, 3 read (handle,
/// descriptor flag), 4 write (handle, flags, data chunk), 5 notify (handle, enable), 6 pair,
/// 7 unpair, 8 clear cache, 9 the link drops, 10 the device notifies 2A19 (a chunk), 11 the
/// gateway's device advertises (its rule connects it), 12 time passes, 13 connection parameters
/// (four 16-bit values: min and max interval, latency, timeout; the server passes on only valid
/// ones for a connection up).
enum ProxyBackendFuzz {
    static let maxSteps = 24
    static let gatewayDevice = BluetoothAddress(rawValue: 0xAA00_0000_0001)
    static let pool: [BluetoothAddress] = [
        BluetoothAddress(rawValue: 0x0A), BluetoothAddress(rawValue: 0x0B), BluetoothAddress(rawValue: 0x0C),
        gatewayDevice, BluetoothAddress(rawValue: 0xDEAD),
    ]
    static let handles: [UInt16] = [0x0B, 0x0D, 0x0A, 0x0C, 0x00, 0xFFFF]

    enum Step: Sendable {
        case connect(BluetoothAddress)
        case disconnect(BluetoothAddress)
        case services(BluetoothAddress)
        case read(BluetoothAddress, UInt16, descriptor: Bool)
        case write(BluetoothAddress, UInt16, descriptor: Bool, [UInt8], withResponse: Bool)
        case notify(BluetoothAddress, UInt16, enable: Bool)
        case pair(BluetoothAddress)
        case unpair(BluetoothAddress)
        case clearCache(BluetoothAddress)
        case drop(BluetoothAddress)
        case value(BluetoothAddress, [UInt8])
        case gatewayAdvertises
        case advance(Double)
        case connectionParameters(BluetoothAddress, ConnectionParameters)

        static func read(_ input: inout FuzzInput) -> Step {
            let op = input.byte() % 14
            let address = pool[Int(input.byte()) % pool.count]
            switch op {
            case 0: return .connect(address)
            case 1: return .disconnect(address)
            case 2: return .services(address)
            case 3: return .read(address, handle(&input), descriptor: input.bool())
            case 4:
                let flags = input.byte()
                return .write(
                    address, handle(&input), descriptor: flags & 1 != 0, input.chunk(limit: 32),
                    withResponse: flags & 2 != 0)
            case 5: return .notify(address, handle(&input), enable: input.bool())
            case 6: return .pair(address)
            case 7: return .unpair(address)
            case 8: return .clearCache(address)
            case 9: return .drop(address)
            case 10: return .value(address, input.chunk(limit: 20))
            case 11: return .gatewayAdvertises
            case 13:
                return .connectionParameters(
                    address,
                    ConnectionParameters(
                        minInterval: input.uint16(), maxInterval: input.uint16(), latency: input.uint16(),
                        supervisionTimeout: input.uint16()))
            default: return .advance(input.pick([0.5, 5, 31, 120]))
            }
        }

        static func handle(_ input: inout FuzzInput) -> UInt16 {
            let choice = input.index(handles.count + 1)
            return choice < handles.count ? handles[choice] : input.uint16()
        }
    }

    /// Which requests were answered, and how often.
    final class Ledger: Sendable {
        private let answers = Mutex<[Int: Int]>([:])
        private let made = Mutex(0)

        /// A new request's number.
        func request() -> Int {
            made.withLock {
                $0 += 1
                return $0
            }
        }

        func answer(_ request: Int) {
            let count = answers.withLock {
                $0[request, default: 0] += 1
                return $0[request]!
            }
            fuzzProperty(count == 1, "proxy-backend: request \(request) answered \(count) times")
        }

        var unanswered: [Int] {
            let total = made.withLock { $0 }
            return answers.withLock { answers in (1...max(1, total)).filter { total > 0 && answers[$0] == nil } }
        }
    }

    /// What the ESPHome API server (ESPHomeAPI/ProxyConnections.swift) keeps for one client and
    /// checks before it calls the backend: the client's connections (from the connect until its
    /// disconnect, a failed connect or the link's loss) and its pairing requests under way.
    final class ServerModel: Sendable {
        private struct State {
            var connections: [BluetoothAddress: (id: Int, connected: Bool)] = [:]
            var deviceRequests: Set<BluetoothAddress> = []
            var nextID = 0
            var lostSeen = 0
        }
        private let state = Mutex(State())

        /// A new connection of `address`, or nil when there is one already (the server answers).
        func open(_ address: BluetoothAddress) -> Int? {
            state.withLock { state in
                guard state.connections[address] == nil else { return nil }
                state.nextID += 1
                state.connections[address] = (state.nextID, false)
                return state.nextID
            }
        }

        func connectDone(_ address: BluetoothAddress, id: Int, success: Bool) {
            state.withLock { state in
                guard state.connections[address]?.id == id else { return }
                if success { state.connections[address]?.connected = true } else { state.connections[address] = nil }
            }
        }

        /// Ends the client's connection of `address`; false when it had none.
        func close(_ address: BluetoothAddress) -> Bool {
            state.withLock { $0.connections.removeValue(forKey: address) != nil }
        }

        func isConnected(_ address: BluetoothAddress) -> Bool {
            state.withLock { $0.connections[address]?.connected == true }
        }

        /// Starts a pairing request for `address`; false when one is under way (refused busy).
        func beginDeviceRequest(_ address: BluetoothAddress) -> Bool {
            state.withLock { $0.deviceRequests.insert(address).inserted }
        }

        func endDeviceRequest(_ address: BluetoothAddress) { state.withLock { _ = $0.deviceRequests.remove(address) } }

        /// The links the backend reported lost since the last call: their connections end.
        func linksLost(_ lost: [(address: UInt64, error: Int32)]) {
            state.withLock { state in
                for event in lost.dropFirst(state.lostSeen) {
                    state.connections[BluetoothAddress(rawValue: event.address)] = nil
                }
                state.lostSeen = max(state.lostSeen, lost.count)
            }
        }
    }

    static let seeds: [[UInt8]] = [
        // Three slots: connect a, list, read 2A19, notify it, a value, write it, disconnect.
        [2, 0, 0, 2, 0, 3, 0, 0, 0, 0, 5, 0, 0, 0, 1, 10, 0, 2, 7, 9, 4, 0, 2, 0, 0, 2, 1, 2, 1, 0],
        // Two slots: the gateway's device connected by its rule, then by the proxy (adopted); b
        // connects and drops; both disconnected; clearing the shared device's cache is refused.
        [1, 11, 3, 12, 3, 1, 0, 0, 3, 3, 3, 0, 0, 0, 0, 1, 9, 1, 1, 1, 1, 3, 8, 3, 0, 1],
        // One slot: a, then b refused; a disconnects and connects again at once; unpair, clear
        // cache, pair and connect an unknown device.
        [0, 0, 0, 0, 1, 1, 0, 0, 0, 7, 0, 8, 2, 6, 4, 0, 4, 1, 4],
        // One slot: a connects, asks for 7.5–15 ms, latency 0, 4 s, then for min above max, and
        // while its link drops; disconnect.
        [
            0, 0, 0, 13, 0, 6, 0, 12, 0, 0, 0, 0x90, 0x01, 13, 0, 12, 0, 6, 0, 0, 0, 0x90, 0x01, 9, 0, 13, 0, 6, 0,
            12, 0, 0, 0, 0x90, 0x01, 1, 0,
        ],
    ]

    static func run(_ bytes: [UInt8]) {
        var input = FuzzInput(bytes)
        let maxConnections = 1 + Int(input.byte() % 3)
        var steps: [Step] = []
        while !input.isEmpty, steps.count < maxSteps { steps.append(Step.read(&input)) }
        let decoded = steps
        let outcome = LoopDriver.run { await drive(maxConnections: maxConnections, steps: decoded) }
        fuzzProperty(outcome == .finished, "proxy-backend: the driver never finished (a call hangs)")
    }

    static func drive(maxConnections: Int, steps: [Step]) async {
        let loop = LoopDriver.loop
        let text = """
            {"homeassistant": {"enabled": false}, "health": {"enabled": false},
             "store_and_forward": {"enabled": false}, "bluetooth": {"max_connections": \(maxConnections)},
             "devices": [{"match": {"address_prefix": "AA:00:00"}, "connect": true}]}
            """
        guard let config = try? GatewayConfig.parse(Array(text.utf8)) else {
            return fuzzProperty(false, "proxy-backend: the config does not parse")
        }
        let ble = InMemoryBLE()
        ble.add(gatewayDevice, .init(characteristics: []))
        let mqtt = InMemoryMQTT()
        mqtt.loop = loop
        let clock = ManualClock(wallMilliseconds: 1_796_058_000_000)
        let proxyBLE = FakeProxyBLE(loop: loop, gatewayBLE: ble)
        for address in pool.dropLast() { proxyBLE.add(address) }
        let server = RecordingServer()
        let backend = ProxyBackend(ble: proxyBLE, loop: loop)
        let gateway = Gateway(
            config: config, ble: ble, mqtt: mqtt, clock: clock, loop: loop,
            reconnect: { FixedReconnectDelay(delay: 5) }, processSample: { nil }, attachment: backend)
        let jobs = Task(executorPreference: loop.taskExecutor) { await gateway.run() }
        do { try await gateway.start() } catch {
            fuzzProperty(false, "proxy-backend: the gateway did not start: \(error)")
        }
        await backend.serve(server)
        await backend.start()
        await loop.settle()

        let ledger = Ledger()
        let model = ServerModel()
        for step in steps {
            await perform(step, backend: backend, proxyBLE: proxyBLE, gateway: gateway, clock: clock, ledger, model)
            await loop.settle()
            model.linksLost(server.lost)
            await checkSlots(backend, maxConnections)
        }
        fuzzProperty(ledger.unanswered.isEmpty, "proxy-backend: requests never answered: \(ledger.unanswered)")

        // The client leaves: it disconnects every device (the server does so for a client that goes).
        for address in pool { await perform(.disconnect(address), backend, ledger, model) }
        await loop.settle()
        let gatewayLinks = ble.isConnected(gatewayDevice) ? 1 : 0
        let free = await freeSlots(backend)
        fuzzProperty(
            free == maxConnections - gatewayLinks,
            "proxy-backend: \(free ?? -1) of \(maxConnections) slots free after every disconnect "
                + "(the gateway holds \(gatewayLinks))")
        fuzzProperty(
            proxyBLE.subscriptionCount == 0,
            "proxy-backend: \(proxyBLE.subscriptionCount) notification subscriptions after every disconnect")

        jobs.cancel()
        await jobs.value
        await backend.stop()
        await gateway.stop()
        await loop.settle()
    }

    static func perform(
        _ step: Step, backend: ProxyBackend<FakeProxyBLE>, proxyBLE: FakeProxyBLE, gateway: Gateway,
        clock: ManualClock, _ ledger: Ledger, _ model: ServerModel
    ) async {
        switch step {
        case .drop(let address): proxyBLE.dropLink(address)
        case .value(let address, let data): proxyBLE.notify(address, 0x0B, data)
        case .gatewayAdvertises:
            await gateway.handle(BLEDiscovery(address: gatewayDevice, advertisement: .init(rssi: -50)))
        case .advance(let seconds):
            clock.advance(by: seconds)
            await LoopDriver.loop.settle()
            await gateway.tick()
        default: await perform(step, backend, ledger, model)
        }
    }

    /// A request of the client's, passed to the backend on the loop thread where the server
    /// passes it on (``ServerModel``); where the server answers itself, answered here.
    static func perform(
        _ step: Step, _ backend: ProxyBackend<FakeProxyBLE>, _ ledger: Ledger, _ model: ServerModel
    ) async {
        let request = ledger.request()
        let answer: @Sendable () -> Void = { ledger.answer(request) }
        _ = try? await LoopDriver.loop.submit {
            switch step {
            case .connect(let address):
                guard let id = model.open(address) else { return answer() }
                guard backend.reserveSlot(address: address.rawValue) else {
                    _ = model.close(address)
                    return answer()
                }
                backend.connect(address: address.rawValue, addressType: 0) { result in
                    if case .success = result {
                        model.connectDone(address, id: id, success: true)
                    } else {
                        model.connectDone(address, id: id, success: false)
                    }
                    answer()
                }
            case .disconnect(let address):
                // The server answers a disconnect at once, and passes on one of a connection.
                if model.close(address) { backend.disconnect(address: address.rawValue) }
                answer()
            case .services(let address), .read(let address, _, _), .write(let address, _, _, _, _),
                .notify(let address, _, _), .pair(let address):
                guard model.isConnected(address) else { return answer() }
                gatt(step, backend, model, answer)
            case .connectionParameters(let address, let parameters):
                guard model.isConnected(address), parameters.problem() == nil else { return answer() }
                gatt(step, backend, model, answer)
            case .unpair, .clearCache:
                gatt(step, backend, model, answer)
            case .drop, .value, .gatewayAdvertises, .advance: answer()
            }
        }
    }

    /// The requests on a connection, and the device requests (one per device at a time).
    static func gatt(
        _ step: Step, _ backend: ProxyBackend<FakeProxyBLE>, _ model: ServerModel,
        _ answer: @escaping @Sendable () -> Void
    ) {
        func deviceRequest(_ address: BluetoothAddress, _ call: (@escaping @Sendable (ProxyFailure?) -> Void) -> Void) {
            guard model.beginDeviceRequest(address) else { return answer() }
            call { _ in
                model.endDeviceRequest(address)
                answer()
            }
        }
        switch step {
        case .services(let address): backend.services(address: address.rawValue) { _ in answer() }
        case .read(let address, let handle, let descriptor):
            backend.read(address: address.rawValue, handle: handle, descriptor: descriptor) { _ in answer() }
        case .write(let address, let handle, let descriptor, let data, let withResponse):
            backend.write(
                address: address.rawValue, handle: handle, descriptor: descriptor, data: data,
                withResponse: withResponse || descriptor
            ) { _ in answer() }
        case .notify(let address, let handle, let enable):
            backend.notify(address: address.rawValue, handle: handle, enable: enable) { _ in answer() }
        case .pair(let address): deviceRequest(address) { backend.pair(address: address.rawValue, done: $0) }
        case .unpair(let address): deviceRequest(address) { backend.unpair(address: address.rawValue, done: $0) }
        case .clearCache(let address):
            deviceRequest(address) { backend.clearCache(address: address.rawValue, done: $0) }
        case .connectionParameters(let address, let parameters):
            deviceRequest(address) {
                backend.setConnectionParameters(address: address.rawValue, parameters: parameters, done: $0)
            }
        default: answer()
        }
    }

    static func freeSlots(_ backend: ProxyBackend<FakeProxyBLE>) async -> Int? {
        (try? await LoopDriver.loop.submit { backend.sharedFreeSlots }) ?? nil
    }

    static func checkSlots(_ backend: ProxyBackend<FakeProxyBLE>, _ maxConnections: Int) async {
        let free = await freeSlots(backend)
        fuzzProperty(
            free.map { (0...maxConnections).contains($0) } == true,
            "proxy-backend: \(free ?? -1) free slots of \(maxConnections)")
    }
}
