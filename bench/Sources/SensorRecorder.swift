import EventLoop
import Foundation
import MQTT

/// What a user's logger sees of the connected sensors: a persistent session (fixed client id,
/// clean session off) subscribed at QoS 1 to their state topics, so the broker keeps what is
/// published while this client reconnects after a broker restart; plus, on a second plain
/// session, every state message counted and each `bridge/health` kept.
final class SensorRecorder: Sendable {
    /// One state message of a sensor.
    struct Reading: Sendable {
        /// The attribute's counter value (``CounterSensor/counterValue(_:)``).
        var value: Int
        /// `last_seen`: with the value, what makes a message itself (a QoS 1 redelivery repeats both).
        var lastSeen: String
        /// Seconds on the monotonic clock.
        var arrival: Double
    }

    /// One `bridge/health`.
    struct Health: Sendable {
        var arrival: Double
        var published: Double
        var cpuSeconds: Double?
        var rssBytes: Double?
        var durable: Bool?
        var queueDepth: Double
        /// Devices in the registry.
        var devices: Double
    }

    private struct State {
        var readings: [String: [Reading]] = [:]
        var healths: [Health] = []
        var stateMessages = 0
    }

    private let state = Locked(State())
    private let loop: EventLoop
    private let sensorsClient: MQTTClient
    private let allClient: MQTTClient
    private let consumers: [Task<Void, Never>]

    init(brokerPort: UInt16, sensors: [CounterSensor]) async throws {
        loop = EventLoop(name: "soak-subscriber")
        var configuration = try MQTTConfiguration(url: "mqtt://127.0.0.1:\(brokerPort)", clientID: "soak-sensors")
        configuration.protocolVersion = .v311
        configuration.cleanSession = false
        configuration.reconnect = MQTTReconnectPolicy(minimumDelay: 0.1, maximumDelay: 0.5)
        sensorsClient = try MQTTClient(configuration: configuration, loop: loop)
        try await sensorsClient.connect()
        var consumers: [Task<Void, Never>] = []
        for sensor in sensors {
            let subscription = try await sensorsClient.subscribe(
                to: try MQTTTopicFilter("gattway/\(sensor.name)"), qos: .atLeastOnce)
            consumers.append(
                Task { [state] in
                    for await message in subscription {
                        guard let object = Self.object(message.payload),
                            let reading = object[sensor.attribute] as? Double,
                            let lastSeen = object["last_seen"] as? String
                        else { continue }
                        let entry = Reading(
                            value: sensor.counterValue(reading), lastSeen: lastSeen, arrival: Soak.monotonic())
                        state.value.withLock { $0.readings[sensor.name, default: []].append(entry) }
                    }
                })
        }
        var plain = try MQTTConfiguration(url: "mqtt://127.0.0.1:\(brokerPort)", clientID: "soak-all-\(getpid())")
        plain.protocolVersion = .v311
        plain.reconnect = MQTTReconnectPolicy(minimumDelay: 0.1, maximumDelay: 0.5)
        allClient = try MQTTClient(configuration: plain, loop: loop)
        try await allClient.connect()
        let all = try await allClient.subscribe(to: MQTTTopicFilter("gattway/+"), qos: .atMostOnce)
        consumers.append(
            Task { [state] in
                for await _ in all { state.value.withLock { $0.stateMessages += 1 } }
            })
        let health = try await allClient.subscribe(to: MQTTTopicFilter("gattway/bridge/health"), qos: .atMostOnce)
        consumers.append(
            Task { [state] in
                for await message in health {
                    guard let object = Self.object(message.payload) else { continue }
                    let process = object["process"] as? [String: Any]
                    let queue = object["queue"] as? [String: Any]
                    let storeAndForward = object["store_and_forward"] as? [String: Any]
                    let entry = Health(
                        arrival: Soak.monotonic(), published: object["published"] as? Double ?? 0,
                        cpuSeconds: process?["cpu_seconds"] as? Double, rssBytes: process?["rss_bytes"] as? Double,
                        durable: storeAndForward?["durable"] as? Bool, queueDepth: queue?["depth"] as? Double ?? 0,
                        devices: object["devices"] as? Double ?? 0)
                    state.value.withLock { $0.healths.append(entry) }
                }
            })
        self.consumers = consumers
    }

    static func object(_ payload: [UInt8]) -> [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(payload))) as? [String: Any]
    }

    func readings(of sensor: CounterSensor) -> [Reading] { state.value.withLock { $0.readings[sensor.name] ?? [] } }
    var healths: [Health] { state.value.withLock { $0.healths } }
    /// State messages (`gattway/<device>`) seen by the plain session (QoS 0: its own reconnects lose some).
    var stateMessages: Int { state.value.withLock { $0.stateMessages } }

    func close() async {
        for consumer in consumers { consumer.cancel() }
        await sensorsClient.disconnect()
        await allClient.disconnect()
        loop.shutdown()
    }
}
