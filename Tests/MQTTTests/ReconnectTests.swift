import EventLoop
import Foundation
import MQTT
import Synchronization
import TestSupport
import Testing

@Suite("MQTT reconnection and delivery across broker restarts")
struct ReconnectTests {
    /// Publishes `count` QoS 1 messages `payload(n)` every `interval` seconds without waiting,
    /// recording each completion.
    static func publishStream(
        _ client: MQTTClient, topic: String, count: Int, interval: Double
    ) async -> Collected<Result<Int, MQTTError>> {
        let completions = Collected<Result<Int, MQTTError>>()
        for n in 0..<count {
            client.publish(MQTTMessage(topic: topic, string: "\(n)", qos: .atLeastOnce)) { result in
                completions.append(result.map { n })
            }
            try? await Task.sleep(nanoseconds: UInt64(interval * 1e9))
        }
        return completions
    }

    @Test("every QoS 1 publish reaches a persistent-session subscriber when the broker restarts mid-stream")
    func brokerRestart() async throws {
        let broker = try await MosquittoBroker(persistent: true)
        let loop = EventLoop()
        defer { loop.shutdown() }
        try await withTimeout(120) {
            var subscriberConfig = try MQTTConfiguration.test(broker.url, "persistent-sub")
            subscriberConfig.cleanSession = false
            subscriberConfig.sessionExpiryInterval = 3600
            let subscriber = try MQTTClient(configuration: subscriberConfig, loop: loop)
            let subscriberStates = Collected<MQTTConnectionState>()
            let stateStream = subscriber.connectionStates()
            let statesTask = Task { for await state in stateStream { subscriberStates.append(state) } }
            try await subscriber.connect()
            let (received, _) = collect(try await subscriber.subscribe(to: "restart/+", qos: .atLeastOnce))

            let publisher = try MQTTClient(configuration: .test(broker.url, "publisher"), loop: loop)
            try await publisher.connect()
            let count = 300
            async let completionsResult = Self.publishStream(
                publisher, topic: "restart/n", count: count, interval: 0.005)
            try await Task.sleep(nanoseconds: 400_000_000)
            broker.stop()  // SIGTERM: mosquitto saves sessions and queued messages
            try await Task.sleep(nanoseconds: 500_000_000)
            try await broker.start()
            let completions = await completionsResult

            try await eventually(timeout: 30, "all publishes completed") { completions.count == count }
            let failures = completions.all.filter { if case .failure = $0 { true } else { false } }
            #expect(failures.isEmpty, "\(failures)")
            try await eventually(timeout: 30, "all \(count) messages at the subscriber") {
                Set(received.all.map(\.payloadString)).count == count
            }
            #expect(Set(received.all.map(\.payloadString)) == Set((0..<count).map(String.init)))
            // The broker kept the subscriber's session across the restart.
            #expect(subscriberStates.all.contains(.connected(sessionPresent: true)), "\(subscriberStates.all)")
            await publisher.disconnect()
            await subscriber.disconnect()
            await statesTask.value
        }
    }

    @Test(
        "after a broker crash (SIGKILL, state lost) the client re-subscribes and its unacknowledged QoS 1 publishes all arrive"
    )
    func brokerCrash() async throws {
        let broker = try await MosquittoBroker()
        let loop = EventLoop()
        defer { loop.shutdown() }
        try await withTimeout(120) {
            let client = try MQTTClient(configuration: .test(broker.url, "crash", version: .v311), loop: loop)
            let states = Collected<MQTTConnectionState>()
            let stateStream = client.connectionStates()
            let statesTask = Task { for await state in stateStream { states.append(state) } }
            try await client.connect()
            // Subscribed on the publishing connection: the broker sends our copy of a message
            // before its PUBACK, so "acknowledged" implies "received" even across a crash, and
            // re-subscribing happens before libmosquitto resends unacknowledged messages.
            let (received, _) = collect(try await client.subscribe(to: "crash/+", qos: .atLeastOnce))
            let count = 300
            async let completionsResult = Self.publishStream(client, topic: "crash/n", count: count, interval: 0.005)
            try await Task.sleep(nanoseconds: 400_000_000)
            broker.kill()
            try await Task.sleep(nanoseconds: 500_000_000)
            try await broker.start()
            let completions = await completionsResult

            try await eventually(timeout: 30, "all publishes completed") { completions.count == count }
            #expect(completions.all.allSatisfy { if case .success = $0 { true } else { false } })
            try await eventually(timeout: 30, "all \(count) messages") {
                Set(received.all.map(\.payloadString)).count == count
            }
            #expect(
                states.all.contains {
                    if case .disconnected(let error, let delay) = $0 { error != nil && delay != nil } else { false }
                })
            #expect(states.all.filter { $0 == .connected(sessionPresent: false) }.count >= 1)
            await client.disconnect()
            await statesTask.value
        }
    }

    @Test(
        "with alternate brokers (a cluster's nodes) the client moves to the next when its broker dies, at once, and its QoS 1 publishes all arrive there"
    )
    func alternateBrokers() async throws {
        let first = try await MosquittoBroker()
        let second = try await MosquittoBroker()
        let refusing = try RefusingPort()
        defer { withExtendedLifetime(refusing) {} }
        let loop = EventLoop()
        defer { loop.shutdown() }
        try await withTimeout(120) {
            // The first URL is dead: connect() goes on to the next ones in the same call.
            var configuration = try MQTTConfiguration.test("mqtt://127.0.0.1:\(refusing.port)", "alternates")
            try configuration.addAlternate(url: first.url)
            try configuration.addAlternate(url: second.url)
            #expect(throws: MQTTError.self) { try configuration.addAlternate(url: "mqtts://127.0.0.1:8883") }
            #expect(throws: MQTTError.self) { try configuration.addAlternate(url: "mqtt://u:p@127.0.0.1:1") }
            let client = try MQTTClient(configuration: configuration, loop: loop)
            try await client.connect()
            #expect(await client.endpoint.port == Int(first.port))
            let watcher = try MQTTClient(configuration: .test(second.url, "watcher"), loop: loop)
            try await watcher.connect()
            let (received, _) = collect(try await watcher.subscribe(to: "moved/+", qos: .atLeastOnce))
            let count = 200
            async let completionsResult = Self.publishStream(client, topic: "moved/n", count: count, interval: 0.005)
            try await Task.sleep(nanoseconds: 300_000_000)
            let killed = ContinuousClock.now
            first.kill()
            try await eventually(timeout: 20, "connected to the second broker") {
                await client.endpoint.port == Int(second.port) && received.count > 0
            }
            let moved = ContinuousClock.now - killed
            #expect(moved < .seconds(5), "took \(moved) to move to the second broker")
            let completions = await completionsResult
            try await eventually(timeout: 30, "all publishes completed") { completions.count == count }
            // What the first broker had not acknowledged is sent again to the second: the
            // messages published after the move all arrive there.
            #expect(completions.all.allSatisfy { if case .success = $0 { true } else { false } })
            let arrived = Set(received.all.compactMap { Int($0.payloadString) })
            let last = (0..<count).filter { !arrived.contains($0) }.max() ?? -1
            #expect(arrived.contains(count - 1) && last < count / 2, "missing at the second broker: up to \(last)")
            await client.disconnect()
            await watcher.disconnect()
        }
    }

    @Test("with nothing listening the client retries with growing delays and does not crash")
    func deadBroker() async throws {
        let refusing = try RefusingPort()
        let port = refusing.port
        defer { withExtendedLifetime(refusing) {} }
        let loop = EventLoop()
        defer { loop.shutdown() }
        try await withTimeout(120) {
            var configuration = try MQTTConfiguration.test("mqtt://127.0.0.1:\(port)", "dead")
            configuration.reconnect = MQTTReconnectPolicy(
                minimumDelay: 0.02, maximumDelay: 0.2, multiplier: 2, jitter: 0.1)
            let once = try MQTTClient(configuration: configuration, loop: loop)
            let error = await #expect(throws: MQTTError.self) { try await once.connect() }
            #expect(error?.description.contains("Connection refused") == true, "\(String(describing: error))")
            await once.disconnect()

            let client = try MQTTClient(configuration: configuration, loop: loop)
            let delays = Collected<Double>()
            let stateStream = client.connectionStates()
            let statesTask = Task {
                for await state in stateStream {
                    if case .disconnected(let error?, let delay?) = state, error.kind != .closed {
                        delays.append(delay)
                    }
                }
            }
            try await client.start()
            let failed = Collected<MQTTError.Kind?>()
            client.publish(MQTTMessage(topic: "x", string: "q0", qos: .atMostOnce)) {
                if case .failure(let error) = $0 { failed.append(error.kind) } else { failed.append(nil) }
            }
            try await eventually("six attempts") { delays.count >= 6 }
            let seen = delays.all
            #expect(seen[0] < 0.03 && seen[2] > seen[0] * 3 && seen[5] <= 0.22, "\(seen)")
            await client.disconnect()
            await statesTask.value
            #expect(failed.all == [.notConnected], "a QoS 0 publish while disconnected fails at once")
        }
    }
}
