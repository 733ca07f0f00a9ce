import MQTT
import Synchronization

extension FuzzTargets {
    /// The MQTT client's state machine (`MQTTSession`) fed a hostile order of what reaches it:
    /// starts, connects and disconnects asked for at any time; CONNACKs with any reason code,
    /// session-present flag and Receive Maximum (0 and 65,535 included), in any phase; connections
    /// lost at any point; publishes of every QoS that libmosquitto takes, refuses or writes inside
    /// the publish call, with message ids that wrap early and repeat; acknowledgements of
    /// outstanding and unknown message ids; subscribers added and removed, SUBSCRIBEs sent or
    /// refused, SUBACKs for any id. The driver does what `MQTTClient` does with each answer.
    ///
    /// Properties: no trap; every publish handed to the session is completed exactly once by the
    /// end (the client closes it) — never twice, never lost; the queue stays within
    /// `maxQueued`; the in-flight count is exactly the QoS 1/2 publishes libmosquitto holds; a
    /// reconnect delay is within the policy's bounds; an attempt goes to a configured broker; a
    /// SUBACK names only a filter whose SUBSCRIBE went out.
    static let mqttSession = FuzzTarget(
        name: "mqtt-session",
        summary: "a hostile order of connection events, publishes, acknowledgements and subscriptions for MQTTSession",
        seeds: { MQTTSessionDriver.seeds() },
        run: { bytes in
            var driver = MQTTSessionDriver(FuzzInput(bytes))
            driver.run()
        })
}

/// Plays `MQTTClient`'s part around an `MQTTSession` for one fuzz input.
struct MQTTSessionDriver {
    /// Which publishes were completed, and how often (by publish number).
    final class Ledger: Sendable {
        private let completions = Mutex<[Int: Int]>([:])

        func completion(_ number: Int) -> MQTTSession.Completion {
            { [self] _ in
                let count = completions.withLock {
                    $0[number, default: 0] += 1
                    return $0[number]!
                }
                fuzzProperty(count == 1, "publish \(number) completed \(count) times")
            }
        }

        var completed: Set<Int> { completions.withLock { Set($0.keys) } }
    }

    static let baseConfiguration: MQTTConfiguration = {
        do { return try MQTTConfiguration(url: "mqtt://192.0.2.1", clientID: "fuzz") } catch {
            fatalError("mqtt-session configuration: \(error)")
        }
    }()

    static let filters = ["home/+/set", "home/#", "bridge/request/#", "homeassistant/status"]

    var input: FuzzInput
    var session: MQTTSession
    let configuration: MQTTConfiguration
    let ledger = Ledger()
    /// Publishes made so far (their numbers are 0..<published).
    var published = 0
    /// Message ids libmosquitto holds a publish for, with whether it is QoS 1/2.
    var outstanding: [(mid: Int32, reliable: Bool)] = []
    var lastMid: Int32 = 0
    /// libmosquitto's ids wrap at 65,535; here sooner, so ids repeat while still pending.
    let midWrap: Int32
    var subscribeMid: Int32 = 0
    var sentFilters: Set<String> = []

    init(_ input: FuzzInput) {
        var input = input
        var configuration = Self.baseConfiguration
        configuration.protocolVersion = input.bool() ? .v5 : .v311
        configuration.maxInflight = 1 + Int(input.byte() % 8)
        configuration.maxQueued = Int(input.byte() % 16)
        if input.bool() { configuration.alternates = [MQTTEndpoint(host: "192.0.2.2", port: 1884)] }
        midWrap = 2 + Int32(input.byte() % 30)
        self.configuration = configuration
        session = MQTTSession(configuration: configuration, seed: UInt64(input.uint32()))
        self.input = input
    }

    mutating func run() {
        var steps = 0
        while !input.isEmpty && steps < 400 {
            steps += 1
            step(input.byte() % 14)
            check()
        }
        // The client's end: disconnect, and close when the DISCONNECT is written or lost.
        if session.disconnectAsked() == .sendDisconnect { perform(session.connectionEnded(lost)) }
        complete(session.close() ?? [])
        let all = Set(0..<published)
        let missing = all.subtracting(ledger.completed)
        fuzzProperty(missing.isEmpty, "publishes never completed: \(missing.sorted().prefix(8))")
        fuzzProperty(session.inflight == 0 && session.queuedCount == 0, "state left after close")
    }

    var lost: MQTTError { MQTTError(.connectionLost, "lost") }

    mutating func step(_ kind: UInt8) {
        switch kind {
        case 0: if session.startAsked() == .attempt { perform(session.beginAttempt()) }
        case 1: if session.connectAsked() == .attempt { perform(session.beginAttempt()) }
        case 2: perform(session.reconnectDue())
        case 3:
            let reason: Int32 = input.pick([0, 0, 0, 5, 0x87, 0x9F, -1, 300])
            let maximum: Int? = input.pick([nil, 0, 1, 3, 65_535])
            perform(session.connected(reason: reason, sessionPresent: input.bool(), receiveMaximum: maximum))
        case 4: perform(session.connectionEnded(lost))
        case 5:
            switch session.disconnectAsked() {
            case .close: complete(session.close() ?? [])
            case .sendDisconnect, .alreadyClosed: break
            }
        case 6, 7: publish()
        case 8: acknowledgeOutstanding()
        case 9:
            // An id libmosquitto holds nothing for (beyond the wrap): nothing to complete.
            let mid = midWrap + 1 + Int32(input.byte())
            if case .done = session.acknowledged(mid: mid, reason: 0) {
                fuzzProperty(false, "a publish completed by the unknown id \(mid)")
            }
        case 10: flush()
        case 11:
            let filter = input.pick(Self.filters)
            let request = session.subscribe(
                filter, id: UInt64(input.byte() % 4), qos: input.pick(MQTTQoS.allCases),
                retainAsPublished: input.bool(), awaitsGrant: input.bool())
            if let request { send(request) }
        case 12:
            if let filter = session.subscribeAcknowledged(mid: Int32(input.byte() % 8)) {
                fuzzProperty(sentFilters.contains(filter), "SUBACK for \(filter), never subscribed")
            }
        default: _ = session.removeSubscriber(UInt64(input.byte() % 4), from: input.pick(Self.filters))
        }
    }

    /// What `MQTTClient.run(_:)` does with the session's actions.
    mutating func perform(_ actions: [MQTTSession.Action]) {
        for action in actions {
            switch action {
            case .connect(let endpoint):
                fuzzProperty(configuration.endpoints.contains(endpoint), "an attempt to \(endpoint)")
            case .scheduleReconnect(let delay):
                let policy = configuration.reconnect
                fuzzProperty(
                    delay.isFinite && delay >= 0 && delay <= policy.maximumDelay * (1 + policy.jitter) + 0.1,
                    "a reconnect after \(delay) s")
            case .fail(let completions, _): complete(completions)
            case .subscribe(let requests): for request in requests { send(request) }
            case .flushQueueAfterRead: flush()
            case .closeFinished: complete(session.close() ?? [])
            case .connectionUp, .report, .finishConnect: break
            }
        }
    }

    mutating func send(_ request: MQTTSession.SubscribeRequest) {
        if input.bool() {
            sentFilters.insert(request.filter)
            subscribeMid = subscribeMid % 7 + 1
            session.subscribeSent(request.filter, mid: subscribeMid)
        } else {
            session.subscribeFailed(request.filter)
        }
    }

    mutating func publish() {
        let number = published
        published += 1
        let message = MQTTMessage(topic: "t", string: "m\(number)", qos: input.pick(MQTTQoS.allCases))
        let completion = ledger.completion(number)
        switch session.admit(message, completion) {
        case .send: handOver(message, completion)
        case .queued: break
        case .closed, .notConnected, .queueFull: completion(.failure(lost))
        }
    }

    mutating func flush() {
        while let (message, completion) = session.nextToSend() { handOver(message, completion) }
    }

    /// What `MQTTClient` does around `mosquitto_publish_v5`: refused before the call, no id, a
    /// failure code, or taken — a QoS 0 publish possibly written (its callback) inside the call.
    mutating func handOver(_ message: MQTTMessage, _ completion: MQTTSession.Completion?) {
        session.handingOver()
        let outcome = input.byte() % 8
        if outcome == 0 {
            session.handOverAborted()
            completion?(.failure(lost))
            return
        }
        var mid: Int32 = 0
        if outcome != 1 {
            lastMid = lastMid % midWrap + 1
            mid = lastMid
        }
        let reliable = message.qos != .atMostOnce
        if outcome == 3 && !reliable && mid != 0 {
            if case .done(let done, _) = session.acknowledged(mid: mid, reason: 0) {
                done?(.success(()))
                if let index = outstanding.firstIndex(where: { $0.mid == mid }) { outstanding.remove(at: index) }
            }
        }
        switch session.handedOver(mid: mid, rc: outcome == 2 ? 4 : 0, qos: message.qos, completion) {
        case .written, .failed: completion?(outcome == 2 ? .failure(lost) : .success(()))
        case .pending: outstanding.append((mid, reliable))
        }
    }

    /// libmosquitto's publish callback for a publish it holds.
    mutating func acknowledgeOutstanding() {
        guard !outstanding.isEmpty else { return }
        let mid = outstanding[input.index(outstanding.count)].mid
        let reason: Int32 = input.pick([0, 0x10, 0x80, 0x97])
        guard case .done(let completion, _) = session.acknowledged(mid: mid, reason: reason) else {
            return fuzzProperty(false, "no publish for an outstanding id \(mid)")
        }
        // The callbacks for one id complete its publishes first to last.
        if let index = outstanding.firstIndex(where: { $0.mid == mid }) { outstanding.remove(at: index) }
        completion?(.success(()))
    }

    mutating func complete(_ completions: [MQTTSession.Completion?]) {
        for completion in completions { completion?(.failure(lost)) }
        if session.phase == .closed { outstanding.removeAll() }
        // A lost connection fails the QoS 0 publishes libmosquitto had not written yet.
        outstanding.removeAll { !$0.reliable && session.phase != .connected }
    }

    func check() {
        fuzzProperty(
            session.queuedCount <= configuration.maxQueued,
            "\(session.queuedCount) queued, maxQueued \(configuration.maxQueued)")
        let reliable = outstanding.filter(\.reliable).count
        fuzzProperty(
            session.inflight == reliable, "in flight \(session.inflight), libmosquitto holds \(reliable) QoS 1/2")
    }

    /// A connection, publishes of each QoS with acknowledgements, a lost connection and a
    /// reconnect, subscriptions, a refused CONNACK, a disconnect.
    static func seeds() -> [[UInt8]] {
        func input(_ header: [UInt8], _ steps: [[UInt8]]) -> [UInt8] { header + steps.flatMap { $0 } }
        let header: [UInt8] = [1, 3, 8, 0, 5, 1, 2, 3, 4]
        let connect: [[UInt8]] = [[0], [3, 0, 0, 1, 0, 0]]
        let publishes: [[UInt8]] = [[6, 0, 0, 4], [6, 1, 0, 4], [6, 2, 0, 4], [6, 0, 0, 3], [8, 0, 0, 0, 0]]
        let subscribe: [[UInt8]] = [[11, 0, 0, 1, 1, 0, 1, 1], [12, 1], [13, 1, 0, 0]]
        let lostAndBack: [[UInt8]] = [[4], [6, 1, 0], [2], [3, 0, 0, 0, 0, 0], [10]]
        return [
            input(header, connect + publishes),
            input(header, connect + subscribe + publishes + lostAndBack + [[5]]),
            input(header, [[1], [3, 1, 0, 0, 0, 0], [4], [6, 1, 0], [2], [3, 0, 0, 0, 3, 0], [5]]),
            input([0, 0, 0, 1, 0, 0, 0, 0, 0], connect + publishes + publishes + [[5], [4], [6, 0, 0, 4]]),
        ]
    }
}
