import EventLoop
import Foundation
import MQTT
import TestSupport
import Testing

@Suite("MQTT client against a real mosquitto")
struct ClientTests {
    @Test(
        "a message published at each QoS arrives once with that QoS and the publish completes",
        arguments: MQTTQoS.allCases)
    func roundTrip(qos: MQTTQoS) async throws {
        let broker = try await MosquittoBroker()
        let loop = EventLoop()
        defer { loop.shutdown() }
        try await withTimeout(120) {
            let client = try MQTTClient(configuration: .test(broker.url), loop: loop)
            try await client.connect()
            let subscription = try await client.subscribe(to: MQTTTopicFilter("t/\(qos.rawValue)/+"), qos: .exactlyOnce)
            #expect(subscription.grantedQoS == .exactlyOnce)
            let (received, task) = collect(subscription)
            for n in 0..<50 {
                try await client.publish(MQTTMessage(topic: "t/\(qos.rawValue)/x", string: "m\(n)", qos: qos))
            }
            try await eventually("50 messages") { received.count >= 50 }
            try await Task.sleep(nanoseconds: 100_000_000)
            #expect(received.all.map(\.payloadString) == (0..<50).map { "m\($0)" })
            #expect(received.all.allSatisfy { $0.qos == qos && !$0.retain && $0.topic == "t/\(qos.rawValue)/x" })
            await client.disconnect()
            await task.value
        }
    }

    @Test("beyond maxQueued a QoS 1 publish fails at once with queueFull; the queued ones all arrive, in order")
    func queueBound() async throws {
        let broker = try await MosquittoBroker()
        let loop = EventLoop()
        defer { loop.shutdown() }
        try await withTimeout(120) {
            var configuration = try MQTTConfiguration.test(broker.url, "bounded")
            configuration.maxInflight = 1
            configuration.maxQueued = 3
            let client = try MQTTClient(configuration: configuration, loop: loop)
            try await client.connect()
            let subscription = try await client.subscribe(to: MQTTTopicFilter("bound/+"), qos: .atLeastOnce)
            let (received, task) = collect(subscription)
            let completions = Collected<(Int, MQTTError.Kind?)>()
            // All ten in one loop turn: one goes in flight, three wait, six find the queue full.
            try await loop.submit {
                for n in 0..<10 {
                    client.publish(MQTTMessage(topic: "bound/x", string: "m\(n)", qos: .atLeastOnce)) { result in
                        switch result {
                        case .success: completions.append((n, nil))
                        case .failure(let error): completions.append((n, error.kind))
                        }
                    }
                }
            }
            try await eventually("ten completions") { completions.count >= 10 }
            #expect(completions.all.filter { $0.1 == .queueFull }.map(\.0) == Array(4..<10))
            #expect(completions.all.filter { $0.1 == nil }.map(\.0).sorted() == Array(0..<4))
            #expect(client.queueFullCount == 6)
            try await eventually("four messages") { received.count >= 4 }
            #expect(received.all.map(\.payloadString) == ["m0", "m1", "m2", "m3"])
            await client.disconnect()
            await task.value
        }
    }

    @Test("every publish of a QoS 0 burst larger than the 65,535 message ids completes, in order")
    func burstBeyondMessageIDs() async throws {
        let broker = try await MosquittoBroker()
        let loop = EventLoop()
        defer { loop.shutdown() }
        try await withTimeout(120) {
            var configuration = try MQTTConfiguration.test(broker.url, "burst")
            configuration.maxQueued = 200_000
            let client = try MQTTClient(configuration: configuration, loop: loop)
            try await client.connect()
            // All in one loop turn while the broker is stopped: the socket fills after some
            // thousands, libmosquitto queues the rest with their ids, and ids are handed out again
            // while the first holders still wait to be written.
            broker.child?.signal(SIGSTOP)
            let count = 150_000
            let completed = Collected<Int>()
            let failed = Collected<Int>()
            let payload = [UInt8](repeating: 0x41, count: 60)
            try await loop.submit {
                for n in 0..<count {
                    client.publish(MQTTMessage(topic: "burst/x", payload: payload, qos: .atMostOnce)) { result in
                        switch result {
                        case .success: completed.append(n)
                        case .failure: failed.append(n)
                        }
                    }
                }
            }
            broker.child?.signal(SIGCONT)
            try await eventually(timeout: 60, "\(count) completions") { completed.count + failed.count >= count }
            #expect(failed.count == 0)
            #expect(completed.all == Array(0..<count))
            await client.disconnect()
        }
    }

    @Test("QoS 1 publishes from mosquitto_pub reach a subscription; ours reach mosquitto_sub")
    func independentPeers() async throws {
        let broker = try await MosquittoBroker()
        let loop = EventLoop()
        defer { loop.shutdown() }
        try await withTimeout(120) {
            let client = try MQTTClient(configuration: .test(broker.url), loop: loop)
            try await client.connect()
            let (received, _) = collect(try await client.subscribe(to: "peer/in"))
            try await ChildProcess.run(
                "mosquitto_pub",
                [
                    "-p", "\(broker.port)", "-h", "127.0.0.1", "-q", "1", "-t", "peer/in", "-m",
                    "hello from mosquitto_pub",
                ])
            try await eventually("mosquitto_pub's message") { received.count == 1 }
            #expect(received.all.first?.payloadString == "hello from mosquitto_pub")

            // -d prints "received SUBACK" once the subscription is in place (line-buffered through
            // stdbuf: the log is a file); only then are our messages sure to reach it.
            let sub = try ChildProcess(
                "stdbuf",
                [
                    "-oL", "mosquitto_sub", "-p", "\(broker.port)", "-h", "127.0.0.1", "-q", "1", "-t", "peer/out",
                    "-v", "-C", "3", "-d",
                ])
            defer { sub.stop() }
            try await sub.waitForOutput(containing: "received SUBACK")
            for n in 0..<3 { try await client.publish(MQTTMessage(topic: "peer/out", string: "ours \(n)")) }
            try await sub.waitForOutput(containing: "peer/out ours 2")
            #expect(sub.log().contains("peer/out ours 0"))
            await client.disconnect()
        }
    }

    @Test("a retained message is delivered, flagged retained, to a subscriber that arrives later")
    func retained() async throws {
        let broker = try await MosquittoBroker()
        let loop = EventLoop()
        defer { loop.shutdown() }
        try await withTimeout(120) {
            let publisher = try MQTTClient(configuration: .test(broker.url, "pub"), loop: loop)
            try await publisher.connect()
            try await publisher.publish(
                MQTTMessage(topic: "gattway/bridge/state", string: #"{"state":"online"}"#, retain: true))
            await publisher.disconnect()

            let late = try MQTTClient(configuration: .test(broker.url, "late", version: .v311), loop: loop)
            try await late.connect()
            let message = try await late.withSubscription(to: "gattway/bridge/#") { subscription in
                var iterator = subscription.makeAsyncIterator()
                return await iterator.next()
            }
            #expect(message?.payloadString == #"{"state":"online"}"#)
            #expect(message?.retain == true)
            await late.disconnect()
        }
    }

    @Test(
        "retain as published: a retained message delivered live keeps its flag with MQTT 5 when asked, loses it otherwise",
        arguments: [(MQTTProtocolVersion.v5, true, true), (.v5, false, false), (.v311, true, false)])
    func retainAsPublished(version: MQTTProtocolVersion, asked: Bool, flagged: Bool) async throws {
        let broker = try await MosquittoBroker()
        let loop = EventLoop()
        defer { loop.shutdown() }
        try await withTimeout(120) {
            let subscriber = try MQTTClient(configuration: .test(broker.url, "sub", version: version), loop: loop)
            try await subscriber.connect()
            let (received, _) = collect(try await subscriber.subscribe(to: "cmd/+", retainAsPublished: asked))
            let publisher = try MQTTClient(configuration: .test(broker.url, "pub"), loop: loop)
            try await publisher.connect()
            try await publisher.publish(MQTTMessage(topic: "cmd/a", string: "on", retain: true))
            try await publisher.publish(MQTTMessage(topic: "cmd/b", string: "off"))
            try await eventually("both messages") { received.count == 2 }
            #expect(received.all.map(\.retain) == [flagged, false])
            await publisher.disconnect()
            await subscriber.disconnect()
        }
    }

    @Test("with a maximum packet size the broker does not hand the client a larger message; smaller ones still arrive")
    func maximumPacketSize() async throws {
        let broker = try await MosquittoBroker()
        let loop = EventLoop()
        defer { loop.shutdown() }
        try await withTimeout(120) {
            var configuration = try MQTTConfiguration.test(broker.url, "small")
            configuration.maximumPacketSize = 1024
            let subscriber = try MQTTClient(configuration: configuration, loop: loop)
            try await subscriber.connect()
            let (received, _) = collect(try await subscriber.subscribe(to: "big/+"))
            let publisher = try MQTTClient(configuration: .test(broker.url, "pub"), loop: loop)
            try await publisher.connect()
            try await publisher.publish(MQTTMessage(topic: "big/a", payload: [UInt8](repeating: 0x41, count: 4096)))
            try await publisher.publish(MQTTMessage(topic: "big/b", string: "small"))
            try await eventually("the small message") { received.count >= 1 }
            #expect(received.all.map(\.topic) == ["big/b"])
            await publisher.disconnect()
            await subscriber.disconnect()
        }
    }

    @Test("the last will is published when the client process is killed")
    func lastWill() async throws {
        let broker = try await MosquittoBroker()
        let loop = EventLoop()
        defer { loop.shutdown() }
        try await withTimeout(120) {
            let observer = try MQTTClient(configuration: .test(broker.url, "observer"), loop: loop)
            try await observer.connect()
            let (received, _) = collect(try await observer.subscribe(to: "peer/+/state"))
            let peer = try ChildProcess(
                try BuiltProduct.path("gattway-mqtt-peer"),
                ["will", broker.url, "peer-1", "peer/1/state", #"{"state":"offline"}"#])
            defer { peer.stop() }
            try await peer.waitForOutput(containing: "connected")
            try await Task.sleep(nanoseconds: 200_000_000)
            #expect(received.count == 0)
            peer.kill9()
            try await eventually("the will") { received.count == 1 }
            #expect(received.all.first?.payloadString == #"{"state":"offline"}"#)
            #expect(received.all.first?.topic == "peer/1/state")
            await observer.disconnect()
        }
    }

    @Test("no last will is published after a clean disconnect")
    func noWillAfterDisconnect() async throws {
        let broker = try await MosquittoBroker()
        let loop = EventLoop()
        defer { loop.shutdown() }
        try await withTimeout(120) {
            let observer = try MQTTClient(configuration: .test(broker.url, "observer"), loop: loop)
            try await observer.connect()
            let (received, _) = collect(try await observer.subscribe(to: "will/topic"))
            var configuration = try MQTTConfiguration.test(broker.url, "willful")
            configuration.will = MQTTMessage(topic: "will/topic", string: "gone")
            let client = try MQTTClient(configuration: configuration, loop: loop)
            try await client.connect()
            await client.disconnect()
            try await Task.sleep(nanoseconds: 500_000_000)
            #expect(received.count == 0)
            await observer.disconnect()
        }
    }
}
