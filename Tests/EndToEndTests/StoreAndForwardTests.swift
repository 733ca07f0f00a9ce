import BlueZSimulator
import Foundation
import MQTT
import TestSupport
import Testing

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
            "\(value)" + (capturedAt.map { String(format: "@%.3f", $0) } ?? "")
                + String(format: " (arrived %.3f)", arrival)
        }
    }

    @Test(
        "broker outage: every reading produced meanwhile arrives exactly once, in order, stamped with its capture time",
        arguments: [
            Outage.graceful, .crash,
        ])
    func brokerOutage(_ outage: Outage) async throws {
        try await EndToEnd.run(config: Self.config(), broker: Self.persistentBroker) { e2e in
            try await Self.withSubscriber(e2e) { recorder in
                try await Self.waitForReadings(recorder, count: 3, after: 0)
                try await Self.waitForPacedReading(recorder)
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
                // Everything from the outage, then live readings for more than two seconds (a state
                // hold after the reconnect would show as a gap here).
                try await Self.waitForReadings(recorder, count: produced + 12, after: before, timeout: 30)
                let readings = Self.firstDeliveries(Self.readings(recorder))
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
                // Capture times in order. (BLE never waiting for MQTT shows in the simulator's
                // notifications going on during the outage and in the unbroken chain; a bound on
                // the time between captures would also catch the machine stalling under load.)
                let captures = stamped.compactMap(\.capturedAt)
                #expect(zip(captures, captures.dropFirst()).allSatisfy { $0 <= $1 }, "capture times \(captures)")
            }
        }
    }

    @Test(
        "kill -9 with a non-empty queue: the restarted gateway replays exactly what was queued, first, in order, once, and the readings go on without a gap"
    )
    func crashWithQueue() async throws {
        let state = try TemporaryDirectory.make(prefix: "sf-state")
        defer { try? FileManager.default.removeItem(at: state) }
        try await EndToEnd.run(config: Self.config(stateDirectory: state.path), broker: Self.persistentBroker) { e2e in
            try await Self.withSubscriber(e2e) { recorder in
                try await Self.waitForReadings(recorder, count: 3, after: 0)
                // Stopped between two readings: none is in flight in the gateway's MQTT client
                // (whose memory the kill would lose: only the disk queue survives it).
                try await Self.waitForPacedReading(recorder)
                let before = recorder.count
                let stoppedAt = Date().timeIntervalSince1970
                e2e.broker.stop()
                _ = try await Self.waitForNotifications(e2e, count: 8)
                let queueFile = state.appendingPathComponent("outbox.log").path
                let (stored, sent) = try await Self.killOnceStored(e2e, queueFile: queueFile)
                let killedAt = Date().timeIntervalSince1970
                let second = try e2e.startGateway()
                defer { second.stop(grace: 5) }
                var persisted = 0
                do {
                    try await second.waitForOutput(containing: "messages from the previous run to replay", timeout: 15)
                    persisted =
                        Self.count(
                            in: second.log(), before: " messages from the previous run", after: "store-and-forward: ")
                        ?? 0
                    // The new gateway reconnects the sensor and queues new readings (broker still
                    // down) for longer than its first state is held for Home Assistant (state_delay).
                    _ = try await Self.waitForNotifications(e2e, count: 8, timeout: 20)
                    try await e2e.broker.start()
                    try await recorder.wait(
                        for: "readings captured by the restarted gateway", count: 12, after: before, timeout: 30
                    ) {
                        ($0.number("battery") != nil)
                            && (Self.capturedAt($0) ?? $0.string("last_seen").flatMap(Self.seconds) ?? 0) > killedAt
                    }
                } catch {
                    throw EndToEndFailure(error: error, gatewayLog: second.log())
                }
                let readings = Self.readings(recorder)
                // The sensor notifies only while someone holds its notification socket, so it sent
                // nothing between the kill and the new gateway's subscription, and the kill came
                // with nothing in flight: every value it sent arrives once, in order — before the
                // crash, the queued ones replayed, then what the restarted gateway captured.
                // The one gap allowed is right before the first queued reading: readings of the
                // moment between the broker's stop and the gateway noticing it (a loaded machine
                // may take longer than a notification interval) went to the MQTT client live and
                // died with it in the kill -9 (docs/operations.md) — at most one per 200 ms of
                // that moment.
                let first = Self.firstDeliveries(readings)
                let queuedFrom = first.firstIndex { $0.capturedAt != nil } ?? 0
                Self.expectChain(Array(first[..<queuedFrom]))
                // From the queue on, one chain across the restart; the only values it may skip at
                // the restart are notifications that reached the dying process (none unless the
                // machine stalled between the last check and the kill).
                let restart =
                    first.firstIndex { ($0.capturedAt ?? $0.lastSeen ?? .infinity) >= killedAt } ?? first.count
                Self.expectChain(Array(first[queuedFrom..<restart]))
                Self.expectChain(Array(first[restart...]))
                // Notifications that reached the dying process after the check (sent - stored,
                // normally none) were either still written to the queue before SIGKILL took
                // effect, or lost with the process: never both, never out of order.
                let captured = { (reading: Reading) in reading.capturedAt ?? reading.lastSeen ?? .infinity }
                let beforeKill = readings.prefix { captured($0) < killedAt }
                let old = Self.firstDeliveries(beforeKill)
                let replayed = old.filter { $0.capturedAt != nil }
                let lateStored = (0...max(0, sent - stored)).first {
                    Self.value(ofNotification: stored + $0) == replayed.last?.value
                }
                if restart > queuedFrom, restart < first.count {
                    #expect(
                        Self.missing(from: first[restart - 1].value, to: first[restart].value) == sent - stored
                            - (lateStored ?? 0),
                        "\(sent - stored) notification(s) reached the dying gateway, \(lateStored ?? 0) of them queued: \(readings)"
                    )
                }
                if queuedFrom > 0, let queuedAt = first[queuedFrom].capturedAt {
                    let lost = Self.missing(from: first[queuedFrom - 1].value, to: first[queuedFrom].value)
                    #expect(
                        lost >= 0 && Double(lost) <= ((queuedAt - stoppedAt) / 0.2).rounded(.down),
                        "\(lost) lost before the first queued reading: \(readings)")
                }
                // Exactly what the first gateway had queued, ending with the last value it stored
                // before it died (the one the kill waited for, or one that slipped in after it).
                #expect(
                    persisted >= 8 && replayed.count == persisted,
                    "\(replayed.count) replayed, \(persisted) queued: \(readings)")
                #expect(
                    lateStored != nil,
                    "last value stored before the kill: one of \((stored...max(stored, sent)).map(Self.value(ofNotification:))): \(readings)"
                )
                // Every queued reading, the restarted gateway's held ones too, carries its capture time.
                for reading in first where reading.capturedAt != nil {
                    if let captured = reading.capturedAt, let lastSeen = reading.lastSeen {
                        #expect(abs(lastSeen - captured) < 0.05, "last_seen \(lastSeen) vs captured_at \(captured)")
                    }
                }
                // Nothing captured before the crash comes after the new readings.
                let new = readings.dropFirst(beforeKill.count)
                #expect(new.count >= 12 && new.allSatisfy { captured($0) >= killedAt }, "\(readings)")
            }
        }
    }

    @Test(
        "max_messages 3: only the newest three readings of the outage are replayed, the dropped ones counted in bridge/health"
    )
    func bounded() async throws {
        let config = Self.config(storeAndForward: #""store_and_forward": {"max_messages": 3},"#)
        try await EndToEnd.run(config: config, broker: Self.persistentBroker) { e2e in
            try await Self.withSubscriber(e2e) { recorder in
                try await Self.waitForReadings(recorder, count: 3, after: 0)
                try await Self.waitForPacedReading(recorder)
                let before = recorder.count
                e2e.broker.stop()
                let produced = try await Self.waitForNotifications(e2e, count: 10)
                let mark = e2e.messages.count
                try await e2e.broker.start()
                try await recorder.wait(
                    for: "three live readings after the replay", count: 3, after: before, timeout: 30
                ) {
                    $0.number("battery") != nil && Self.capturedAt($0) == nil
                }
                try await Self.waitForReadings(recorder, count: 6, after: before, timeout: 30)
                let readings = Self.firstDeliveries(Self.readings(recorder))
                // The queue held three at the reconnect (readings captured during the replay
                // queue behind it and are stamped too).
                let log = e2e.gateway.log()
                #expect(
                    Self.count(in: log, before: " queued messages", after: "replaying ") == 3,
                    "\(readings)\n\(log.split(separator: "\n").suffix(40).joined(separator: "\n"))")
                // A health snapshot taken after the replay counts what was dropped (one the MQTT
                // client still held from before the outage may arrive after the reconnect too).
                let health = try await e2e.messages.next(on: "gattway/bridge/health", after: mark, timeout: 10) {
                    if case .number(let replayed)? = $0.json?["queue"]?["replayed"] { return replayed >= 3 }
                    return false
                }
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
                // From the replayed three on, every reading follows: those captured while the
                // replay ran queued behind it (a batch in flight is never pushed out).
                Self.expectChain(Array(readings[index...]))
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
    static func withSubscriber(_ e2e: EndToEnd, filter: String = topic, _ body: (MessageRecorder) async throws -> Void)
        async throws
    {
        var configuration = try MQTTConfiguration(
            url: e2e.broker.url, clientID: "e2e-sf-\(UUID().uuidString.prefix(8))")
        configuration.cleanSession = false
        configuration.sessionExpiryInterval = UInt32.max
        configuration.reconnect = MQTTReconnectPolicy(minimumDelay: 0.1, maximumDelay: 0.5)
        let client = try MQTTClient(configuration: configuration, loop: e2e.loop)
        try await client.connect()
        let recorder = MessageRecorder()
        let subscription = try await client.subscribe(to: MQTTTopicFilter(filter), qos: .atLeastOnce)
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
                throw RecorderTimeout(
                    description: "only \(now - start) of \(count) notifications within \(timeout) s: BLE paused?")
            }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
    }

    static func waitForReadings(_ recorder: MessageRecorder, count: Int, after start: Int, timeout: Double = 20)
        async throws
    {
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
                value: Int(value), capturedAt: capturedAt(received),
                lastSeen: received.string("last_seen").flatMap(seconds),
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

    /// Waits until a battery reading arrives at the notification pace (≥ 150 ms after the one
    /// before, not in a burst such as the first states released after `state_delay`), so the
    /// next one is ~200 ms away: a broker stopped now has nothing of the gateway's in flight.
    static func waitForPacedReading(_ recorder: MessageRecorder, timeout: Double = 10) async throws {
        let deadline = MessageRecorder.now() + timeout
        var known = recorder.all.filter { $0.number("battery") != nil }.count
        while MessageRecorder.now() < deadline {
            let battery = recorder.all.filter { $0.number("battery") != nil }
            if battery.count > known, battery.count >= 2,
                battery[battery.count - 1].arrival - battery[battery.count - 2].arrival >= 0.15
            {
                return
            }
            known = battery.count
            try await Task.sleep(nanoseconds: 2_000_000)
        }
        throw RecorderTimeout(description: "no battery reading at the notification pace within \(timeout) s")
    }

    /// Kills the gateway once it stored the sensor's latest notification in its queue file
    /// (the payload of the file's last message carries that value), soon after the notification
    /// so the next one (200 ms later) is far off: nothing is in flight at the kill. Returns how
    /// many notifications the simulator had sent when the last one was stored, and when the
    /// process was gone (more only if a stalled machine let one reach the dying process).
    static func killOnceStored(_ e2e: EndToEnd, queueFile: String) async throws -> (stored: Int, sent: Int) {
        let deadline = MessageRecorder.now() + 15
        while MessageRecorder.now() < deadline {
            let sent = await e2e.simulator.currentCounters.notifications
            var next = sent
            while next == sent, MessageRecorder.now() < deadline {
                try await Task.sleep(nanoseconds: 1_000_000)
                next = await e2e.simulator.currentCounters.notifications
            }
            let notifiedAt = MessageRecorder.now()
            // Stored within 100 ms (else wait for the next one): half the interval is left.
            while MessageRecorder.now() - notifiedAt < 0.1 {
                if lastStoredBattery(queueFile) == value(ofNotification: next) {
                    guard await e2e.simulator.currentCounters.notifications == next else { break }
                    e2e.gateway.kill9()
                    return (next, await e2e.simulator.currentCounters.notifications)
                }
                try await Task.sleep(nanoseconds: 1_000_000)
            }
        }
        throw RecorderTimeout(description: "the gateway did not store a notification within 100 ms of it in 15 s")
    }

    /// The battery level in the last message of the queue file (its payloads are stored as
    /// they are, so the last `"battery":` in the file is the newest queued reading).
    static func lastStoredBattery(_ path: String) -> Int? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        let text = String(decoding: data, as: UTF8.self)
        guard let key = text.range(of: #""battery":"#, options: .backwards) else { return nil }
        return Int(text[key.upperBound...].prefix { $0.isNumber })
    }

    /// The number between `after` and `before` in the first log line holding both, e.g. N in
    /// "store-and-forward: N messages from the previous run to replay".
    static func count(in log: String, before: String, after: String) -> Int? {
        guard let line = log.split(separator: "\n").first(where: { $0.contains(before) && $0.contains(after) }),
            let start = line.range(of: after)
        else { return nil }
        return Int(line[start.upperBound...].prefix { $0.isNumber })
    }

    /// The value of the simulator's `n`-th battery notification (1-based): 99, 98, … 5, 100, 99, …
    static func value(ofNotification n: Int) -> Int { 100 - n % 96 }

    /// The readings without MQTT's QoS 1 redeliveries: a message identical to one received
    /// before (same value, `last_seen` and `captured_at`) is the same message again.
    static func firstDeliveries(_ readings: some Sequence<Reading>) -> [Reading] {
        var seen: Set<String> = []
        return readings.filter { seen.insert("\($0.value) \($0.lastSeen ?? -1) \($0.capturedAt ?? -1)").inserted }
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

    /// Every reading follows the previous one on the counter: no gap, no reordering, and no
    /// second reading of the same value. The one repeat allowed is MQTT's own QoS 1 redelivery —
    /// the *same* message (``firstDeliveries(_:)``) delivered again, later, because the broker
    /// went away before it saw the subscriber's PUBACK; the gateway never duplicates a reading.
    static func expectChain(_ readings: [Reading], sourceLocation: SourceLocation = #_sourceLocation) {
        let first = firstDeliveries(readings)
        for (earlier, later) in zip(first, first.dropFirst()) {
            #expect(
                follows(earlier.value, later.value),
                "\(later.value) after \(earlier.value) in \(readings)", sourceLocation: sourceLocation)
        }
    }
}
