import BlueZSimulator
import DBus
import ESPHomeAPI
import EventLoop
import Foundation
import Subprocess
import TestSupport

/// The Home Assistant Bluetooth proxy (docs/ha-bluetooth-proxy.md), issue #20 item 7: how long an
/// advertisement takes from the simulator's report to an API client, and the CPU gattway spends per
/// forwarded advertisement at 1,000 adv/s with two Noise-encrypted clients.
///
/// One world (private bus, simulator in this process), one mosquitto, `gattway run` with the MQTT
/// gateway as in the advertisement pipeline (every device matched and published) and
/// `bluetooth_proxy` on loopback with a key. 1,000 advertisers at 1 s each (1,000 adv/s): 900 of the
/// mixed sensors of the gateway suite, 100 with the simulator's `monotonic_stamp` (its monotonic
/// clock at the report, in manufacturer data 0xFFFF). Phase 1: no API client (the gateway's own
/// CPU at this load); phase 2: two clients subscribed to raw advertisements. CPU per forwarded
/// advertisement = (phase 2 − phase 1) / advertisements delivered to the first client. Latency =
/// the client's monotonic receipt time − the stamp, over the stamped advertisements of phase 2 —
/// the whole path: simulator → D-Bus → gattway → Noise → TCP → the client's thread. A listener of
/// its own on the bus (its own loop thread) notes when each stamped report's PropertiesChanged
/// reaches it: the client's time minus that one is gattway's share (the proxy's added latency),
/// the rest the simulator's and the bus's, which the machine's load moves.
enum ESPHomeBench: BenchSuite {
    static let name = "esphome"
    static let advertisers = 1_000
    static let stamped = 100
    static let seconds: Double = 30
    static let key = [UInt8](0..<32)

    /// `gattway run` with the MQTT gateway publishing every device and the proxy on loopback with
    /// ``key``; `bluetooth` is the inside of the `bluetooth` section.
    static func proxyConfig(brokerPort: UInt16, apiPort: UInt16, bluetooth: String = #""max_devices": 2000"#) -> String
    {
        """
        {"mqtt": {"server": "mqtt://127.0.0.1:\(brokerPort)", "client_id": "gattway-bench", "protocol": "3.1.1", "qos": 0},
         "bluetooth": {\(bluetooth)},
         "homeassistant": {"enabled": false}, "health": {"enabled": false},
         "bluetooth_proxy": {"enabled": true, "listen": "127.0.0.1:\(apiPort)", "name": "bench",
                             "encryption_key": "\(Data(key).base64EncodedString())"},
         "devices": [{"match": {}}]}
        """
    }

    static func run() async throws -> [BenchRow] {
        let broker = try await MosquittoBroker()
        defer { broker.stop() }
        FileHandle.standardError.write(Data("esphome: load average \(loadAverage()) at start\n".utf8))
        let world = try await SimulatedWorld(scenario: GatewayBench.emptyScenario)
        let apiPort = try LoopbackPort.free()
        let config = proxyConfig(brokerPort: broker.port, apiPort: apiPort)
        let gattway = try await GatewayProcess.gattway(config: config, world: world)
        defer { gattway.stop() }
        let reference = try await BusReference(address: world.daemon.address)
        try await Task.sleep(for: .seconds(1))
        try await world.simulator.addProxyAdvertisers()
        try await Task.sleep(for: .seconds(2))
        // Phase 1: the gateway alone.
        let (alone, reports1) = try await PhaseUsage.measure(gattway) {
            let before = await world.simulator.counterValues().advertisementReports
            try await Task.sleep(for: .seconds(seconds))
            return await world.simulator.counterValues().advertisementReports - before
        }
        // Phase 2: two API clients.
        let clients = try [BenchAPIClient(port: apiPort, psk: key), BenchAPIClient(port: apiPort, psk: key)]
        defer { for client in clients { client.close() } }
        try await Task.sleep(for: .seconds(2))
        // The clients count in the same window as the simulator's reports (read right after the
        // reset and right before the snapshot).
        let (together, (reports2, received)) = try await PhaseUsage.measure(gattway) {
            let before = await world.simulator.counterValues().advertisementReports
            for client in clients { client.reset() }
            reference.reset()
            try await Task.sleep(for: .seconds(seconds))
            let received = clients.map(\.snapshot)
            return (await world.simulator.counterValues().advertisementReports - before, received)
        }
        let busArrivals = reference.arrivals
        await reference.close()
        await world.simulator.removeProxyAdvertisers()
        await world.stop()

        let delivered = received[0].advertisements
        let latencies = received.flatMap { $0.latencies.map(\.latency) }.sorted()
        // gattway's share: the client's receipt − the bus listener's receipt of the same report.
        let shares = received.flatMap { snapshot in
            snapshot.latencies.compactMap { sample -> Int64? in
                busArrivals[sample.stamp].map { Int64(bitPattern: sample.stamp &+ sample.latency &- $0) }
            }
        }.sorted()
        func percentile(_ p: Double, of values: [Int64]) -> Double {
            guard !values.isEmpty else { return .nan }
            let index = min(values.count - 1, Int((Double(values.count - 1) * p).rounded()))
            return Double(values[index]) / 1e6
        }
        func percentile(_ p: Double) -> Double {
            percentile(p, of: latencies.map { Int64(clamping: $0) })
        }
        let extra = together.cpuSeconds - alone.cpuSeconds
        let perAdvertisement = delivered > 0 ? extra / Double(delivered) * 1e6 : .nan
        let conditions =
            "\(advertisers) advertisers at \(Int(Double(reports2) / seconds)) reports/s, 2 Noise clients, "
            + "\(Int(seconds)) s; load \(loadAverage())"
        return [
            BenchRow(
                name: "proxy: advertisements to each client", value: Double(delivered) / seconds, unit: "adv/s",
                detail:
                    "client 2: \(Double(received[1].advertisements) / seconds) adv/s; simulator \(Double(reports2) / seconds) reports/s; \(conditions)"
            ),
            BenchRow(
                name: "proxy: latency p50", value: percentile(0.5), unit: "ms", target: "≤ 100",
                detail: "simulator report → API client, \(latencies.count) stamped advertisements over both clients"),
            BenchRow(name: "proxy: latency p99", value: percentile(0.99), unit: "ms", target: "≤ 100"),
            BenchRow(name: "proxy: latency max", value: percentile(1), unit: "ms"),
            BenchRow(
                name: "proxy: gattway's share p50", value: percentile(0.5, of: shares), unit: "ms",
                detail:
                    "API client receipt − a bus listener's receipt of the same PropertiesChanged, \(shares.count) matched; "
                    + "the bus listener saw \(busArrivals.count) stamped reports, client 1 \(received[0].latencies.count)"
            ),
            BenchRow(name: "proxy: gattway's share p99", value: percentile(0.99, of: shares), unit: "ms"),
            BenchRow(
                name: "proxy: CPU per forwarded advertisement", value: perAdvertisement, unit: "µs",
                detail:
                    "(CPU with 2 clients − CPU without) / advertisements delivered to one client: \(together.cpuSeconds.formatted(2)) s − \(alone.cpuSeconds.formatted(2)) s over \(delivered) (± \((0.02 / Double(max(delivered, 1)) * 1e6).formatted(2)) µs: /proc counts CPU in 10 ms ticks)"
            ),
            BenchRow(
                name: "proxy: gattway CPU with 2 clients", value: together.cpuSeconds / seconds * 100,
                unit: "% of a core",
                detail:
                    "without clients \((alone.cpuSeconds / seconds * 100).formatted(1)) % (\(Double(reports1) / seconds) reports/s); RSS \(together.rssPeak.megabytes.formatted(1)) MB peak"
            ),
        ]
    }
}

extension BlueZSimulator {
    /// 1,000 advertisers at 1 s: the gateway suite's mixed sensors, and every tenth a stamp.
    func addProxyAdvertisers() throws {
        for index in 0..<ESPHomeBench.advertisers {
            let address = GatewayBench.advertiserAddress(index)
            if index % (ESPHomeBench.advertisers / ESPHomeBench.stamped) == 0 {
                try addDevice(
                    json:
                        #"{"address": "\#(address)", "interval": 1, "connectable": false, "manufacturer_data": {"0xFFFF": {"template": "monotonic_stamp"}}}"#
                )
            } else {
                try addDevice(json: GatewayBench.advertiserJSON(address: address, index: index, interval: 1))
            }
        }
    }

    func removeProxyAdvertisers() {
        for index in 0..<ESPHomeBench.advertisers { try? removeDevice(address: GatewayBench.advertiserAddress(index)) }
    }
}

/// A Noise client of the proxy that subscribes to raw advertisements and counts them on a thread
/// of its own; stamped ones (manufacturer data 0xFFFF, 8 bytes) give a latency.
final class BenchAPIClient: @unchecked Sendable {
    struct Snapshot: Sendable {
        var advertisements = 0
        /// Per stamped advertisement: its stamp and receipt − stamp (ns).
        var latencies: [(stamp: UInt64, latency: UInt64)] = []
    }

    private let fd: Int32
    private let state = Locked(Snapshot())
    private var receive: NoiseCipher
    private var send: NoiseCipher
    private var decoder = NoiseFrameDecoder(maxFrame: 0xFFFF)
    private var thread: Thread?

    init(port: UInt16, psk: [UInt8]) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.fd = fd
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0, var handshake = NoiseHandshake(psk: psk), let first = handshake.writeClientMessage()
        else { throw BenchError("cannot connect to the proxy on port \(port)") }
        Self.write(fd, (NoiseFrameDecoder.encode([]) ?? []) + (NoiseFrameDecoder.encode([0x00] + first) ?? []))
        var decoder = NoiseFrameDecoder(maxFrame: 0xFFFF)
        var frames: [[UInt8]] = []
        while frames.count < 2 {
            if let frame = try decoder.next() {
                frames.append(frame)
                continue
            }
            let bytes = Self.read(fd)
            guard !bytes.isEmpty else { throw BenchError("the proxy closed the handshake") }
            decoder.append(bytes)
        }
        guard frames[1].first == 0x00, let (send, receive) = handshake.readServerMessage(frames[1].dropFirst()) else {
            throw BenchError("the proxy refused the key")
        }
        self.send = send
        self.receive = receive
        self.decoder = decoder
        var hello = ProtobufWriter()
        hello.string(1, "gattway-bench")
        hello.uint32(2, 1)
        hello.uint32(3, 10)
        sendMessage(ServerMessage(type: MessageType.helloRequest, payload: hello.bytes))
        sendMessage(ServerMessage(type: MessageType.subscribeBluetoothLEAdvertisementsRequest, payload: [0x08, 0x01]))
        let thread = Thread { [self] in readLoop() }
        thread.stackSize = 1 << 20
        self.thread = thread
        thread.start()
    }

    var snapshot: Snapshot { state.value.withLock { $0 } }

    func reset() { state.value.withLock { $0 = Snapshot() } }

    func close() {
        shutdown(fd, Int32(SHUT_RDWR))
    }

    private func sendMessage(_ message: ServerMessage) {
        let count = message.payload.count
        let plain =
            [
                UInt8(truncatingIfNeeded: message.type >> 8), UInt8(truncatingIfNeeded: message.type),
                UInt8(truncatingIfNeeded: count >> 8), UInt8(truncatingIfNeeded: count),
            ] + message.payload
        guard let sealed = send.encrypt(plain), let frame = NoiseFrameDecoder.encode(sealed) else { return }
        Self.write(fd, frame)
    }

    private func readLoop() {
        defer { Glibc.close(fd) }
        while true {
            let bytes = Self.read(fd)
            guard !bytes.isEmpty else { return }
            decoder.append(bytes)
            while let frame = try? decoder.next() {
                let now = EventLoop.now()
                guard let plain = receive.decrypt(frame[...]), plain.count >= 4 else { return }
                let type = UInt16(plain[0]) << 8 | UInt16(plain[1])
                if type == MessageType.bluetoothLERawAdvertisementsResponse {
                    count(plain.dropFirst(4), now: now)
                } else if type == MessageType.pingRequest {
                    sendMessage(.empty(MessageType.pingResponse))
                }
            }
        }
    }

    private func count(_ payload: ArraySlice<UInt8>, now: UInt64) {
        var advertisements = 0
        var latencies: [(stamp: UInt64, latency: UInt64)] = []
        var reader = ProtobufReader(payload)
        while let (field, value) = try? reader.next() {
            guard field == 1, case .lengthDelimited(let entry) = value else { continue }
            advertisements += 1
            var inner = ProtobufReader(entry)
            while let (innerField, innerValue) = try? inner.next() {
                guard innerField == 4, case .lengthDelimited(let data) = innerValue else { continue }
                if let stamp = Self.stamp(Array(data)), now >= stamp { latencies.append((stamp, now - stamp)) }
            }
        }
        state.value.withLock {
            $0.advertisements += advertisements
            $0.latencies += latencies
        }
    }

    /// The 8-byte stamp of manufacturer data 0xFFFF, if the AD structures hold one.
    static func stamp(_ data: [UInt8]) -> UInt64? {
        var index = 0
        while index + 1 < data.count {
            let length = Int(data[index])
            guard length > 0, index + length < data.count else { return nil }
            if data[index + 1] == 0xFF, length == 11, data[index + 2] == 0xFF, data[index + 3] == 0xFF {
                return (0..<8).reduce(UInt64(0)) { $0 | UInt64(data[index + 4 + $1]) << UInt64(8 * $1) }
            }
            index += length + 1
        }
        return nil
    }

    static func write(_ fd: Int32, _ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress.map { $0 + offset }, bytes.count - offset, Int32(MSG_NOSIGNAL))
            }
            guard written > 0 else { return }
            offset += written
        }
    }

    static func read(_ fd: Int32) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: 16_384)
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        return count > 0 ? Array(buffer[0..<count]) : []
    }
}

/// A listener on the world's bus, on a loop of its own: when each stamped report's
/// PropertiesChanged (manufacturer data 0xFFFF) reaches a client of the bus, by stamp.
final class BusReference: @unchecked Sendable {
    private let loop = EventLoop(name: "bench-bus-reference")
    private let connection: DBusConnection
    private var handler: DBusSignalHandler?
    private let state = Locked([UInt64: UInt64]())

    init(address: String) async throws {
        connection = try await DBusConnection.connect(to: .address(address), on: loop)
        let state = self.state
        handler = try await connection.handleSignals(
            matching: DBusMatchRule(interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged")
        ) { message in
            let now = EventLoop.now()
            guard message.arguments.count >= 2, let changed = message.arguments[1].dictionary,
                let entries = changed["ManufacturerData"]?.entries
            else { return }
            for entry in entries where entry.key.uint16 == 0xFFFF {
                guard let bytes = entry.value.bytes, bytes.count == 8 else { continue }
                let stamp = bytes.enumerated().reduce(UInt64(0)) { $0 | UInt64($1.element) << UInt64(8 * $1.offset) }
                state.value.withLock { $0[stamp] = now }
            }
        }
    }

    var arrivals: [UInt64: UInt64] { state.value.withLock { $0 } }

    func reset() { state.value.withLock { $0.removeAll() } }

    func close() async {
        handler?.cancel()
        await connection.close()
        loop.shutdown()
    }
}
