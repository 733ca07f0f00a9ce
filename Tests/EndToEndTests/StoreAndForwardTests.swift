import BlueZSimulator
import Foundation
import MQTT
import Testing
import TestSupport

/// Store-and-forward through `gattway run` (docs/operations.md): the broker goes away while the
/// battery sensor keeps notifying, and a user subscribed to its state topic with a persistent
/// session (QoS 1, fixed client id, as a logger or a database bridge would) gets every reading
/// exactly once, in order, the ones from the outage stamped with their capture time.
///
/// The scenario's battery level counts down by one per notification (99, 98, … 5, then 100
/// again), one notification every 200 ms, so a gap or a duplicate shows in the values.
@Suite("End to end: store-and-forward")
struct StoreAndForwardTests {
    static let device = "battery_sensor"
    static let topic = "gattway/battery_sensor"

    /// How the broker goes away.
    enum Outage: String, CustomTestStringConvertible, Sendable {
        /// SIGTERM: clients see the connection close, the broker saves its state.
        case graceful
        /// SIGKILL: a crash; the broker saved its state at the last change (autosave on changes).
        case crash
        var testDescription: String { rawValue }
    }

    /// One battery reading as the subscriber got it.
    struct Reading: Sendable, CustomStringConvertible {
        var value: Int
        /// The `captured_at` user property (seconds since 1970), present on replayed messages.
        var capturedAt: Double?
        var lastSeen: Double?
        /// Wall-clock arrival (seconds since 1970).
        var arrival: Double
        var description: String {
            "\(value)" + (capturedAt.map { String(format: "@%.3f", $0) } ?? "") + String(format: " (arrived %.3f)", arrival)
        }
    }

    @Test("broker outage: every reading produced meanwhile arrives exactly once, in order, stamped with its capture time", arguments: [
        Outage.graceful, .crash,
    ])
    func brokerOutage(_ outage: Outage) async throws {
        try await EndToEnd.run(config: Self.config(), broker: Self.persistentBroker) { e2e in
            try await Self.withSubscriber(e2e) { recorder in
                try await Self.waitForReadings(recorder, count: 3, after: 0)
                let before = recorder.count
                let stoppedAt = Date().timeIntervalSince1970
                switch outage {
                case .graceful: e2e.broker.stop()
                case .crash: e2e.broker.kill()
                }
                // BLE goes on: a dozen notifications (≈ 2.4 s) while the broker is away.
                let produced = try await Self.waitForNotifications(e2e, count: 12)
                let restartedAt = Date().timeIntervalSince1970
                try await e2e.broker.start()
                // Everything from the outage, then three live readings.
                try await Self.waitForReadings(recorder, count: produced + 3, after: before, timeout: 30)
                let readings = Self.readings(recorder)

                Self.expectChain(readings)
                let stamped = readings.filter { $0.capturedAt != nil }
                // A reading or two may have been handed to the client before it saw the
                // connection drop; those are resent by the client, unstamped. All others are replayed.
                #expect(stamped.count >= produced - 2, "\(stamped.count) stamped of \(produced) produced: \(readings)")
                for reading in stamped {
                    guard let captured = reading.capturedAt else { continue }
                    // Captured after the broker went; the last ones while the gateway waited out its
                    // reconnect backoff after the broker was back.
                    #expect(captured >= stoppedAt - 0.5, "captured before the outage: \(reading)")
                    #expect(captured < reading.arrival, "\(reading)")
                    #expect(reading.arrival >= restartedAt, "\(reading)")
                    if let lastSeen = reading.lastSeen {
                        #expect(abs(lastSeen - captured) < 0.05, "last_seen \(lastSeen) vs captured_at \(captured)")
                    } else {
                        Issue.record("no last_seen in \(reading)")
                    }
                }
                // Captured at the notification pace: never paused for MQTT.
                let captures = stamped.compactMap(\.capturedAt)
                for (earlier, later) in zip(captures, captures.dropFirst()) {
                    #expect(later > earlier && later - earlier < 0.6, "capture times \(captures)")
                }
            }
        }
    }

    @Test("kill -9 with a non-empty queue: the restarted gateway replays it in order, once, before the new readings")
    func crashWithQueue() async throws {
        let state = try TemporaryDirectory.make(prefix: "sf-state")
        defer { try? FileManager.default.removeItem(at: state) }
        try await EndToEnd.run(config: Self.config(stateDirectory: state.path), broker: Self.persistentBroker) { e2e in
            try await Self.withSubscriber(e2e) { recorder in
                try await Self.waitForReadings(recorder, count: 3, after: 0)
                let before = recorder.count
                e2e.broker.stop()
                let queued = try await Self.waitForNotifications(e2e, count: 8)
                let queueFile = state.appendingPathComponent("outbox.log").path
                let size = (try? FileManager.default.attributesOfItem(atPath: queueFile)[.size] as? Int) ?? 0
                #expect(size > 0, "no \(queueFile) with queued messages")
                let killedAt = Date().timeIntervalSince1970
                e2e.gateway.kill9()

                let second = try e2e.startGateway()
                defer { second.stop(grace: 5) }
                do {
                    try await second.waitForOutput(containing: "messages from the previous run to replay", timeout: 15)
                    // The new gateway reconnects the sensor and queues new readings (broker still down).
                    _ = try await Self.waitForNotifications(e2e, count: 5, timeout: 20)
                    try await e2e.broker.start()
                    try await recorder.wait(for: "readings captured by the restarted gateway", count: 3, after: before, timeout: 30) {
                        ($0.number("battery") != nil) && (Self.capturedAt($0).map { $0 > killedAt } ?? true)
                    }
                } catch {
                    throw EndToEndFailure(error: error, gatewayLog: second.log())
                }
                let readings = Self.readings(recorder)
                let old = Array(readings.prefix { ($0.capturedAt ?? $0.lastSeen ?? .infinity) < killedAt })
                let new = Array(readings.dropFirst(old.count))
                // Before the crash: the readings up to the outage, then the queued ones, as one chain.
                Self.expectChain(old)
                let replayed = old.filter { $0.capturedAt != nil }
                #expect(replayed.count >= queued - 2, "\(replayed.count) replayed of \(queued) queued before the crash: \(readings)")
                // Nothing captured before the crash comes after the new readings.
                #expect(new.allSatisfy { ($0.capturedAt ?? $0.lastSeen ?? .infinity) >= killedAt }, "\(readings)")
                // After the restart the counter goes on (notifications while no gateway ran are
                // lost; the first value may be the characteristic read again).
                if let last = old.last?.value, let first = new.first?.value {
                    #expect(first <= last || last < 10, "\(readings)")
                }
                let values = new.map(\.value)
                for (earlier, later) in zip(values.dropFirst(), values.dropFirst(2)) where earlier > 10 {
                    #expect(later < earlier, "new readings out of order or repeated: \(new)")
                }
            }
        }
    }

    @Test("max_messages 3: only the newest three readings of the outage are replayed, the dropped ones counted in bridge/health")
    func bounded() async throws {
        let config = Self.config(storeAndForward: #""store_and_forward": {"max_messages": 3},"#)
        try await EndToEnd.run(config: config, broker: Self.persistentBroker) { e2e in
            try await Self.withSubscriber(e2e) { recorder in
                try await Self.waitForReadings(recorder, count: 3, after: 0)
                let before = recorder.count
                e2e.broker.stop()
                let produced = try await Self.waitForNotifications(e2e, count: 10)
                let mark = e2e.messages.count
                try await e2e.broker.start()
                try await recorder.wait(for: "three live readings after the replay", count: 3, after: before, timeout: 30) {
                    $0.number("battery") != nil && Self.capturedAt($0) == nil
                }
                try await Self.waitForReadings(recorder, count: 6, after: before, timeout: 30)
                let readings = Self.readings(recorder)
                let stamped = readings.filter { $0.capturedAt != nil }
                #expect(stamped.count == 3, "\(readings)\n\(e2e.gateway.log().split(separator: "\n").suffix(40).joined(separator: "\n"))")
                // The health snapshot after the reconnect counts what was dropped.
                let health = try await e2e.messages.next(on: "gattway/bridge/health", after: mark, timeout: 10)
                guard case .number(let full)? = health.json?["dropped"]?["queue_full"] else {
                    Issue.record("no dropped.queue_full in \(health.text)")
                    return
                }
                // The gap in the values is exactly what was dropped (the oldest), nothing else is missing.
                let index = readings.firstIndex { $0.capturedAt != nil } ?? 0
                let missing = index > 0 ? Self.missing(from: readings[index - 1].value, to: readings[index].value) : -1
                #expect(Int(full) == missing, "queue_full \(full), values missing \(missing): \(readings)")
                #expect(Int(full) >= produced - 3 - 2, "queue_full \(full) with \(produced) produced")
                Self.expectChain(Array(readings[..<index]))
                // The three replayed readings follow each other; readings produced while the replay
                // runs queue behind it in the same three places, so later ones only keep their order.
                let replayed = readings[index...].prefix { $0.capturedAt != nil }
                #expect(replayed.count == 3)
                Self.expectChain(Array(replayed))
                let values = readings[index...].map(\.value)
                #expect(zip(values, values.dropFirst()).allSatisfy { $0 > $1 }, "order after the replay: \(values)")
            }
        }
    }

    // MARK: Helpers

    /// The battery sensor only, not retained (a subscriber sees what is published, once),
    /// health every second.
    static func config(stateDirectory: String? = nil, storeAndForward: String = "") -> String {
        let state = stateDirectory.map { #""state_directory": "\#($0)","# } ?? ""
        return """
            {
              "mqtt": {"server": "$SERVER", "base_topic": "gattway", "client_id": "gattway-e2e-sf", "retain": false},
              "bluetooth": {"connect_timeout": "5s", "gatt_timeout": "3s"},
              "health": {"interval": "1s"},
              \(state)
              \(storeAndForward)
              "devices": [
                {"match": {"address": "A4:C1:38:00:00:01"}, "name": "\(device)", "connect": true,
                 "subscribe": [{"service": "180F", "characteristic": "2A19", "parser": "battery_level"}]}
              ]
            }
            """
    }

    /// A broker that keeps sessions across restarts: saved on a graceful stop, and after every
    /// change so a SIGKILL loses no subscription.
    @Sendable static func persistentBroker() async throws -> MosquittoBroker {
        try await MosquittoBroker(persistent: true, extraConfig: ["autosave_on_changes true", "autosave_interval 1"])
    }

    /// A user's client: persistent session (fixed id, clean start off, session never expires),
    /// QoS 1 subscription to the battery sensor's state, reconnecting quickly.
    static func withSubscriber(_ e2e: EndToEnd, _ body: (MessageRecorder) async throws -> Void) async throws {
        var configuration = try MQTTConfiguration(url: e2e.broker.url, clientID: "e2e-sf-\(UUID().uuidString.prefix(8))")
        configuration.cleanSession = false
        configuration.sessionExpiryInterval = UInt32.max
        configuration.reconnect = MQTTReconnectPolicy(minimumDelay: 0.1, maximumDelay: 0.5)
        let client = try MQTTClient(configuration: configuration, loop: e2e.loop)
        try await client.connect()
        let recorder = MessageRecorder()
        let subscription = try await client.subscribe(to: MQTTTopicFilter(topic), qos: .atLeastOnce)
        let recording = Task { for await message in subscription { recorder.record(message) } }
        defer { recording.cancel() }
        do {
            try await body(recorder)
        } catch {
            await client.disconnect()
            throw error
        }
        await client.disconnect()
    }

    /// Waits until the simulator delivered `count` more notifications than now; returns how many it did.
    static func waitForNotifications(_ e2e: EndToEnd, count: Int, timeout: Double = 10) async throws -> Int {
        let start = await e2e.simulator.currentCounters.notifications
        let deadline = MessageRecorder.now() + timeout
        while true {
            let now = await e2e.simulator.currentCounters.notifications
            if now - start >= count { return now - start }
            if MessageRecorder.now() > deadline {
                throw RecorderTimeout(description: "only \(now - start) of \(count) notifications within \(timeout) s: BLE paused?")
            }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
    }

    static func waitForReadings(_ recorder: MessageRecorder, count: Int, after start: Int, timeout: Double = 20) async throws {
        try await recorder.wait(for: "\(count) battery readings", count: count, after: start, timeout: timeout) {
            $0.number("battery") != nil
        }
    }

    /// Every battery reading the subscriber got, in arrival order.
    static func readings(_ recorder: MessageRecorder) -> [Reading] {
        let offset = Date().timeIntervalSince1970 - MessageRecorder.now()
        return recorder.all.compactMap { received in
            guard let value = received.number("battery") else { return nil }
            return Reading(
                value: Int(value), capturedAt: capturedAt(received), lastSeen: received.string("last_seen").flatMap(seconds),
                arrival: received.arrival + offset)
        }
    }

    static func capturedAt(_ received: MessageRecorder.Received) -> Double? {
        received.message.properties.userProperties.first { $0.name == "captured_at" }.flatMap { seconds($0.value) }
    }

    /// Seconds since 1970 of an ISO 8601 UTC time with milliseconds.
    static func seconds(_ text: String) -> Double? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)?.timeIntervalSince1970
    }

    /// The scenario's counter: 99, 98, … 5, then 100.
    static func follows(_ earlier: Int, _ later: Int) -> Bool {
        later == earlier - 1 || (earlier == 5 && later == 100)
    }

    /// How many counter values lie strictly between `earlier` and `later`.
    static func missing(from earlier: Int, to later: Int) -> Int {
        var value = earlier
        var count = 0
        while count < 200 {
            value = value == 5 ? 100 : value - 1
            if value == later { return count }
            count += 1
        }
        return -1
    }

    /// Consecutive readings follow the counter: no gap, no duplicate, no reordering. The very
    /// first reading may be the characteristic's initial read (100) before the notifications.
    /// Every reading follows the previous one: no gap, no reordering, and no second reading of the
    /// same value. The one repeat allowed is MQTT's own QoS 1 redelivery — the *same* message
    /// (same value and same `last_seen`) delivered again because its PUBACK was lost when the
    /// broker went away; the gateway itself never duplicates a reading.
    static func expectChain(_ readings: [Reading], sourceLocation: SourceLocation = #_sourceLocation) {
        for (earlier, later) in zip(readings, readings.dropFirst()) {
            if later.value == earlier.value, let seen = later.lastSeen, seen == earlier.lastSeen { continue }
            #expect(follows(earlier.value, later.value),
                    "\(later.value) after \(earlier.value) in \(readings)", sourceLocation: sourceLocation)
        }
    }
}
