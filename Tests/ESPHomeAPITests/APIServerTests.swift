import ESPHomeAPI
import EventLoop
import GatewayFakes
import Glibc
import Synchronization
import Testing

/// The server on a loopback port with plaintext framing, driven by a blocking test client.
@Suite("ESPHome API server", .serialized)
struct APIServerTests {
    final class Harness: @unchecked Sendable {
        let loop = EventLoop(name: "api-test")
        var server: APIServer?
        /// Serves connections through the proxy (on this loop), when the test gave one.
        var backend: (any BluetoothProxyBackend)?
        let lines = Mutex<[String]>([])

        init(
            maxClients: Int = 4, maxFrame: Int = 1024, maxQueued: Int = 256 * 1024, handshakeTimeout: Double = 10,
            idleTimeout: Double = 90, connectionSlots: Int = 3,
            backend makeBackend: ((EventLoop) -> any BluetoothProxyBackend)? = nil
        ) async throws {
            let backend = makeBackend?(loop)
            self.backend = backend
            var configuration = APIServerConfiguration(
                host: "127.0.0.1", port: 0, encryption: .plaintext, name: "testpi", friendlyName: "Test Pi",
                macAddress: "AA:BB:CC:DD:EE:FF", bluetoothMacAddress: "AA:BB:CC:DD:EE:FF", version: "0.0-test",
                maxClients: maxClients, connectionSlots: connectionSlots)
            configuration.maxFrame = maxFrame
            configuration.maxQueuedBytes = maxQueued
            configuration.handshakeTimeout = handshakeTimeout
            configuration.idleTimeout = idleTimeout
            let config = configuration
            server = try await loop.submit { [self] in
                let server = APIServer(configuration: config, loop: loop, backend: backend) { [self] _, line in
                    lines.withLock { $0.append(line) }
                }
                try server.start()
                return server
            }
        }

        var port: UInt16 { get async { (try? await loop.submit { [self] in server?.port ?? 0 }) ?? 0 } }

        func statistics() async -> APIServerStatistics {
            (try? await loop.submit { [self] in server?.statistics ?? APIServerStatistics() }) ?? APIServerStatistics()
        }

        func forward(_ advertisement: ServerMessage.RawAdvertisement, times: Int = 1) async {
            _ = try? await loop.submit { [self] in
                for _ in 0..<times { server?.forward(advertisement) }
            }
        }

        func stop() async {
            _ = try? await loop.submit { [self] in server?.stop() }
            loop.shutdown()
        }
    }

    typealias TestClient = ESPHomeTestClient

    static func hello() -> [UInt8] { ESPHomeTestClient.hello() }

    @Test func sessionAndAdvertisements() async throws {
        let harness = try await Harness()
        var client = try TestClient(port: await harness.port)
        client.send(type: MessageType.helloRequest, Self.hello())
        let helloReceived = client.receive()
        let hello = try #require(helloReceived)
        #expect(hello.type == MessageType.helloResponse)
        // The old ConnectRequest, which clients before mid-2025 (Home Assistant 2025.4) send after
        // the hello and wait for: answered, empty (no password, none needed).
        client.send(type: MessageType.authenticationRequest)
        let authentication = client.receive()
        #expect(authentication?.type == MessageType.authenticationResponse && authentication?.payload == [])
        client.send(type: MessageType.deviceInfoRequest)
        let infoReceived = client.receive()
        let info = try #require(infoReceived)
        #expect(info.type == MessageType.deviceInfoResponse)
        var reader = ProtobufReader(info.payload)
        var flags: UInt32 = 0
        while let (field, value) = try reader.next() {
            if field == 15 { flags = try value.uint32(field: field) }
        }
        #expect(flags & BluetoothProxyFeatures.rawAdvertisements.rawValue != 0)
        client.send(type: MessageType.listEntitiesRequest)
        #expect(client.receive()?.type == MessageType.listEntitiesDoneResponse)
        client.send(type: MessageType.pingRequest)
        #expect(client.receive()?.type == MessageType.pingResponse)
        // No backend (connections through the proxy not served): connect and GATT requests are
        // refused at once.
        client.send(type: MessageType.bluetoothDeviceRequest, [0x08, 0x01, 0x10, 0x04])
        let refusedReceived = client.receive()
        let refused = try #require(refusedReceived)
        #expect(refused.type == MessageType.bluetoothDeviceConnectionResponse)
        #expect(
            refused.payload == ServerMessage.deviceConnection(address: 1, connected: false, mtu: 0, error: 0x85).payload
        )
        client.send(type: MessageType.bluetoothGATTReadRequest, [0x08, 0x01, 0x10, 0x0B])
        let errorReceived = client.receive()
        let error = try #require(errorReceived)
        #expect(error.type == MessageType.bluetoothGATTErrorResponse)
        #expect(error.payload == ServerMessage.gattError(address: 1, handle: 11, error: -1).payload)
        client.send(type: MessageType.subscribeBluetoothLEAdvertisementsRequest, [0x08, 0x01])
        #expect(client.receive()?.type == MessageType.bluetoothScannerStateResponse)
        let advertisement = ServerMessage.RawAdvertisement(
            address: 0xA4C1_380B_1234, rssi: -70, addressType: 0, data: [0x02, 0x01, 0x06])
        // A second client subscribed too gets the same advertisement.
        var second = try TestClient(port: await harness.port)
        second.send(type: MessageType.helloRequest, Self.hello())
        second.send(type: MessageType.subscribeBluetoothLEAdvertisementsRequest, [0x08, 0x01])
        #expect(second.receive()?.type == MessageType.helloResponse)
        #expect(second.receive()?.type == MessageType.bluetoothScannerStateResponse)
        await harness.forward(advertisement)
        let expected = ServerMessage.rawAdvertisements([advertisement])
        let batchReceived = client.receive()
        let batch = try #require(batchReceived)
        #expect(batch.type == expected.type && batch.payload == expected.payload)
        let otherReceived = second.receive()
        let other = try #require(otherReceived)
        #expect(other.payload == expected.payload)
        // A scanner state change reaches every subscriber.
        _ = try await harness.loop.submit { [harness] in harness.server?.scannerState = .stopped }
        let stateReceived = client.receive()
        let state = try #require(stateReceived)
        #expect(
            state.type == MessageType.bluetoothScannerStateResponse
                && state.payload == [0x08, 0x05, 0x10, 0x01, 0x18, 0x01])
        #expect(second.receive()?.type == MessageType.bluetoothScannerStateResponse)
        client.send(type: MessageType.disconnectRequest)
        #expect(client.receive()?.type == MessageType.disconnectResponse)
        #expect(client.receive() == nil)
        #expect(await harness.statistics().advertisementsSent == 2)
        client.close()
        second.close()
        await harness.stop()
    }

    /// BluetoothScannerSetModeRequest reaches the server's owner (which switches the scan), and
    /// the state response carries the true mode beside the configured one: Home Assistant's auto
    /// mode and its mismatch warning read them.
    @Test func scannerSetModeSwitchesAndReportsTheTrueMode() async throws {
        let harness = try await Harness()
        let requested = Mutex<[BluetoothScannerMode]>([])
        _ = try await harness.loop.submit { [harness] in
            guard let server = harness.server else { return }
            server.configuredScannerMode = .passive
            server.scannerMode = .passive
            // As the proxy does: the central follows the request, and its new mode is reported.
            server.scannerModeRequested = { mode in
                requested.withLock { $0.append(mode) }
                server.scannerMode = mode
            }
        }
        var client = try TestClient(port: await harness.port)
        client.send(type: MessageType.helloRequest, Self.hello())
        #expect(client.receive()?.type == MessageType.helloResponse)
        client.send(type: MessageType.subscribeBluetoothLEAdvertisementsRequest, [0x08, 0x01])
        let initialReceived = client.receive()
        let initial = try #require(initialReceived)
        #expect(
            initial.payload == ServerMessage.scannerState(.running, mode: .passive, configuredMode: .passive).payload)

        client.send(type: MessageType.bluetoothScannerSetModeRequest, [0x08, 0x01])  // ACTIVE
        // The answer (mode as it was), then the change: active now, configured still passive.
        let answerReceived = client.receive()
        let answer = try #require(answerReceived)
        let changedReceived = client.receive()
        let changed = try #require(changedReceived)
        #expect(answer.type == MessageType.bluetoothScannerStateResponse)
        #expect(
            changed.payload == ServerMessage.scannerState(.running, mode: .active, configuredMode: .passive).payload)
        #expect(requested.withLock { $0 } == [.active])

        // A mode the protocol does not have is answered with the state and not passed on.
        client.send(type: MessageType.bluetoothScannerSetModeRequest, [0x08, 0x07])
        let ignoredReceived = client.receive()
        let ignored = try #require(ignoredReceived)
        #expect(
            ignored.payload == ServerMessage.scannerState(.running, mode: .active, configuredMode: .passive).payload)
        client.send(type: MessageType.bluetoothScannerSetModeRequest, [])  // PASSIVE (the default 0)
        _ = client.receive()
        let backReceived = client.receive()
        let back = try #require(backReceived)
        #expect(back.payload == ServerMessage.scannerState(.running, mode: .passive, configuredMode: .passive).payload)
        #expect(requested.withLock { $0 } == [.active, .passive])
        client.close()
        await harness.stop()
    }

    @Test func messageBeforeHelloClosesTheConnection() async throws {
        let harness = try await Harness()
        var client = try TestClient(port: await harness.port)
        client.send(type: MessageType.deviceInfoRequest)
        #expect(client.receive() == nil)
        #expect(await harness.statistics().protocolErrors == 1)
        client.close()
        await harness.stop()
    }

    @Test func oversizeAndMalformedFramesCloseTheConnection() async throws {
        let harness = try await Harness(maxFrame: 64)
        var big = try TestClient(port: await harness.port)
        big.send([0x00, 0x41, 0x01] + [UInt8](repeating: 0, count: 65))
        #expect(big.receive() == nil)
        var bad = try TestClient(port: await harness.port)
        bad.send(type: MessageType.helloRequest, [0x0A, 0x09, 0x41])  // a string running past the end
        #expect(bad.receive() == nil)
        var preamble = try TestClient(port: await harness.port)
        preamble.send([0x07, 0x00, 0x00])
        #expect(preamble.receive() == nil)
        let statistics = await harness.statistics()
        #expect(statistics.oversizeFrames == 1)
        #expect(statistics.protocolErrors == 2)
        #expect(statistics.clients == 0)
        for client in [big, bad, preamble] { client.close() }
        await harness.stop()
    }

    @Test func maxClientsRefusesTheNext() async throws {
        let harness = try await Harness(maxClients: 1)
        var first = try TestClient(port: await harness.port)
        first.send(type: MessageType.helloRequest, Self.hello())
        #expect(first.receive()?.type == MessageType.helloResponse)
        var second = try TestClient(port: await harness.port)
        #expect(second.receive() == nil)
        #expect(await harness.statistics().refusedFull == 1)
        first.close()
        second.close()
        await harness.stop()
    }

    /// Silence: no Hello in time closes; a quiet session is pinged at half the idle timeout and
    /// kept while it answers, closed when it does not.
    @Test func timeoutsAndPings() async throws {
        let harness = try await Harness(handshakeTimeout: 1, idleTimeout: 4)
        var mute = try TestClient(port: await harness.port)
        var answering = try TestClient(port: await harness.port)
        answering.send(type: MessageType.helloRequest, Self.hello())
        #expect(answering.receive()?.type == MessageType.helloResponse)
        var silent = try TestClient(port: await harness.port)
        silent.send(type: MessageType.helloRequest, Self.hello())
        #expect(silent.receive()?.type == MessageType.helloResponse)
        #expect(mute.receive() == nil)  // closed after the 1 s handshake timeout (checked every second)
        // Both connected clients are pinged after 2 s of silence; one answers.
        #expect(answering.receive()?.type == MessageType.pingRequest)
        answering.send(type: MessageType.pingResponse)
        #expect(silent.receive()?.type == MessageType.pingRequest)
        #expect(silent.receive() == nil)  // closed after 4 s without a byte
        let statistics = await harness.statistics()
        #expect(statistics.idleTimeouts == 2)
        #expect(statistics.clients == 1)
        for client in [mute, answering, silent] { client.close() }
        await harness.stop()
    }

    /// A client that subscribes and never reads is disconnected once its queue passes the bound.
    @Test func slowClientIsDisconnected() async throws {
        let harness = try await Harness(maxQueued: 4096)
        var client = try TestClient(port: await harness.port)
        var size: Int32 = 4096
        setsockopt(client.fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        client.send(type: MessageType.helloRequest, Self.hello())
        client.send(type: MessageType.subscribeBluetoothLEAdvertisementsRequest, [0x08, 0x01])
        #expect(client.receive()?.type == MessageType.helloResponse)
        let advertisement = ServerMessage.RawAdvertisement(
            address: 1, rssi: -50, addressType: 1, data: [UInt8](repeating: 0xAB, count: 62))
        // Loopback sockets buffer megabytes before the queue itself grows: up to 32 MB are offered.
        for _ in 0..<200 {
            await harness.forward(advertisement, times: 2000)
            if await harness.statistics().slowClients == 1 { break }
        }
        #expect(await harness.statistics().slowClients == 1)
        #expect(await harness.statistics().clients == 0)
        client.close()
        await harness.stop()
    }
}

/// The server with Noise encryption, probed by APIProbe (gattway doctor's client).
@Suite("ESPHome API server with Noise", .serialized)
struct APIServerNoiseTests {
    static let key = [UInt8](0..<32)

    static func start(_ loop: EventLoop, encryption: APITransport.Encryption) async throws -> APIServer {
        let configuration = APIServerConfiguration(
            host: "127.0.0.1", port: 0, encryption: encryption, name: "noisepi", friendlyName: "Noise Pi",
            macAddress: "AA:BB:CC:DD:EE:FF", bluetoothMacAddress: "AA:BB:CC:DD:EE:FF", version: "0.0-test",
            maxClients: 4, connectionSlots: 3)
        return try await loop.submit {
            let server = APIServer(configuration: configuration, loop: loop) { _, _ in }
            try server.start()
            return server
        }
    }

    @Test func probeWithTheKeyAndWithout() async throws {
        let loop = EventLoop(name: "api-noise-test")
        let server = try await Self.start(loop, encryption: .noise(psk: Self.key))
        let port = try await loop.submit { server.port }
        let answer = try APIProbe.run(host: "127.0.0.1", port: port, psk: Self.key, timeout: 5).get()
        #expect(answer.helloName == "noisepi" && answer.name == "noisepi")
        #expect(answer.macAddress == "AA:BB:CC:DD:EE:FF")
        #expect(answer.apiVersion.major == 1 && answer.serverInfo == "gattway 0.0-test")
        #expect(answer.bluetoothProxyFeatures & BluetoothProxyFeatures.rawAdvertisements.rawValue != 0)
        let wrong = APIProbe.run(host: "127.0.0.1", port: port, psk: [UInt8](1...32), timeout: 5)
        #expect(wrong == .failure(.keyRefused("Handshake MAC failure")))
        let plain = APIProbe.run(host: "127.0.0.1", port: port, psk: nil, timeout: 5)
        #expect(plain == .failure(.wrongEncryption("the server expects Noise encryption (set encryption_key)")))
        let statistics = try await loop.submit { server.statistics }
        // The plaintext client is Home Assistant's probe, counted apart from protocol errors.
        #expect(statistics.handshakeFailures == 1 && statistics.plaintextProbes == 1 && statistics.protocolErrors == 0)
        _ = try await loop.submit { server.stop() }
        loop.shutdown()
    }

    /// Home Assistant's config flow first says hello in plaintext (the answer tells it that the
    /// proxy encrypts), then makes a handshake with the all-zero key to read the node name,
    /// before it asks the user for the key: both refused, logged at info, and counted apart from
    /// protocol errors and wrong keys.
    @Test func homeAssistantsProbesAreExpectedNotErrors() async throws {
        let loop = EventLoop(name: "api-noise-test")
        let lines = Mutex<[(APIServerLogLevel, String)]>([])
        let configuration = APIServerConfiguration(
            host: "127.0.0.1", port: 0, encryption: .noise(psk: Self.key), name: "noisepi", friendlyName: "Noise Pi",
            macAddress: "AA:BB:CC:DD:EE:FF", bluetoothMacAddress: "AA:BB:CC:DD:EE:FF", version: "0.0-test",
            maxClients: 4, connectionSlots: 0)
        let server = try await loop.submit {
            let server = APIServer(configuration: configuration, loop: loop) { level, line in
                lines.withLock { $0.append((level, line)) }
            }
            try server.start()
            return server
        }
        let port = try await loop.submit { server.port }
        // What aioesphomeapi's plaintext helper sends: HelloRequest (and, before mid-2025, the
        // ConnectRequest) in plaintext frames.
        let client = try APIServerTests.TestClient(port: port)
        client.send(
            PlaintextFrameDecoder.encode(ServerMessage(type: MessageType.helloRequest, payload: APIServerTests.hello()))
        )
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 256)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(client.fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { break }
            answer += buffer[0..<count]
        }
        client.close()
        // A Noise frame whose first byte is 0x01 (aioesphomeapi: "requires encryption").
        #expect(answer == NoiseFrameDecoder.encode([0x01] + Array("Bad indicator byte".utf8)))
        // The second probe: Home Assistant's all-zero key (32 ASCII "0"), refused as another key
        // is, with the name to read; the same for 32 zero bytes (aioesphomeapi's provisioning).
        for zero in [[UInt8](repeating: 0x30, count: 32), [UInt8](repeating: 0, count: 32)] {
            let answer = APIProbe.run(host: "127.0.0.1", port: port, psk: zero, timeout: 5)
            #expect(answer == .failure(.keyRefused("Handshake MAC failure")))
        }
        let statistics = try await loop.submit { server.statistics }
        #expect(statistics.plaintextProbes == 1 && statistics.protocolErrors == 0)
        #expect(statistics.zeroKeyProbes == 2 && statistics.handshakeFailures == 0)
        let logged = lines.withLock { $0 }
        let probe = logged.filter { $0.1.contains("a plaintext hello") }
        #expect(probe.count == 1 && probe.first?.0 == .info, "\(logged)")
        #expect(probe.first?.1.contains("requires encryption") == true)
        let zeroKey = logged.filter { $0.1.contains("all-zero key") }
        #expect(zeroKey.count == 2 && zeroKey.allSatisfy { $0.0 == .info }, "\(logged)")
        #expect(!logged.contains { $0.0 == .warning || $0.0 == .error }, "\(logged)")
        _ = try await loop.submit { server.stop() }
        loop.shutdown()
    }

    @Test func noiseClientAgainstPlaintextServer() async throws {
        let loop = EventLoop(name: "api-noise-test")
        let server = try await Self.start(loop, encryption: .plaintext)
        let port = try await loop.submit { server.port }
        let result = APIProbe.run(host: "127.0.0.1", port: port, psk: Self.key, timeout: 5)
        #expect(result == .failure(.wrongEncryption("the server speaks plaintext (no encryption_key there)")))
        let unreachable = APIProbe.run(host: "127.0.0.1", port: 1, psk: nil, timeout: 5)
        guard case .failure(.unreachable) = unreachable else {
            Issue.record("expected unreachable, got \(unreachable)")
            return
        }
        _ = try await loop.submit { server.stop() }
        loop.shutdown()
    }
}

extension APIServerTests {
    /// A flood of bad connections is counted in full but logged within the budget.
    @Test func badConnectionsDoNotFloodTheLog() async throws {
        let harness = try await Harness()
        for _ in 0..<60 {
            var client = try TestClient(port: await harness.port)
            client.send([0x07])
            _ = client.receive()
            client.close()
        }
        #expect(await harness.statistics().protocolErrors == 60)
        let warnings = harness.lines.withLock { $0.filter { $0.contains("a frame starting with 0x07") } }
        #expect(warnings.count >= 20 && warnings.count <= 22, "\(warnings.count) warnings")
        await harness.stop()
    }
}
