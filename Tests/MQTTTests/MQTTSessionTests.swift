import Retry
import Synchronization
import Testing

@testable import MQTT

/// The session state machine driven without a broker: each test feeds it the inputs the client
/// would (what libmosquitto reported) and checks the actions it returns — what the client then
/// does: connect, schedule a reconnect, send, complete a publish, subscribe, report a state.
@Suite("MQTT session state machine")
struct MQTTSessionTests {
    // MARK: Reconnecting

    @Test("after a refused first attempt start() retries with the policy's growing, seeded delays")
    func startRetriesWithBackoff() throws {
        var session = try Self.session(seed: 7)
        #expect(session.startAsked() == .attempt)
        #expect(Step.of(session.beginAttempt()) == [.report(.connecting(attempt: 1)), .connect(Self.broker)])
        #expect(Step.of(session.connected(reason: 0x87, sessionPresent: false, receiveMaximum: nil)).isEmpty)
        let refusal = try #require(session.refusal)
        #expect(refusal.kind == .refused(.notAuthorized))

        // The delays are ExponentialBackoff's for the configured policy, drawn from SplitMix64
        // with the session's seed: the same every run.
        var model = ExponentialBackoff(Self.policy.backoff)
        var random = SplitMix64(seed: 7)
        var delays: [Double] = []
        var failure = refusal
        for attempt in 2...4 {
            let expected = model.next(random: random.unit())
            #expect(
                Step.of(session.connectionEnded(failure)) == [
                    .report(.disconnected(error: failure, reconnectIn: expected)), .scheduleReconnect(after: expected),
                ])
            delays.append(expected)
            #expect(Step.of(session.reconnectDue()) == [.report(.connecting(attempt: attempt)), .connect(Self.broker)])
            failure = MQTTError(.library(14), "connection refused")
        }
        // 1 s, 2 s, 4 s, each spread by at most ±20 %.
        #expect((0.8...1.2).contains(delays[0]) && (1.6...2.4).contains(delays[1]) && (3.2...4.8).contains(delays[2]))

        // A connection resets the backoff and the attempt count.
        let up = Step.of(session.connected(reason: 0, sessionPresent: false, receiveMaximum: nil))
        #expect(
            up == [
                .connectionUp, .flushQueueAfterRead, .report(.connected(sessionPresent: false)), .finishConnect(nil),
            ])
        model.reset()
        let first = model.next(random: random.unit())
        let lost = MQTTError(.connectionLost, "lost")
        #expect(
            Step.of(session.connectionEnded(lost)) == [
                .report(.disconnected(error: lost, reconnectIn: first)), .scheduleReconnect(after: first),
            ])
        #expect(Step.of(session.reconnectDue()) == [.report(.connecting(attempt: 1)), .connect(Self.broker)])
    }

    @Test("after a refused first attempt connect() fails without a retry; once connected it reconnects")
    func connectFailsOnce() throws {
        var session = try Self.session()
        #expect(session.connectAsked() == .attempt)
        _ = session.beginAttempt()
        _ = session.connected(reason: 0x86, sessionPresent: false, receiveMaximum: nil)
        let refusal = try #require(session.refusal)
        #expect(
            Step.of(session.connectionEnded(refusal)) == [
                .report(.disconnected(error: refusal, reconnectIn: nil)), .finishConnect(refusal.kind),
            ])
        #expect(session.phase == .idle)
        #expect(Step.of(session.reconnectDue()).isEmpty, "no retry is scheduled")

        // connect() again: this time the broker accepts, and a lost connection is retried.
        #expect(session.connectAsked() == .attempt)
        #expect(Step.of(session.beginAttempt()) == [.report(.connecting(attempt: 2)), .connect(Self.broker)])
        #expect(
            Step.of(session.connected(reason: 0, sessionPresent: false, receiveMaximum: nil)).contains(
                .finishConnect(nil)))
        #expect(session.connectAsked() == .connected)
        let lost = MQTTError(.connectionLost, "lost")
        let steps = Step.of(session.connectionEnded(lost))
        guard case .scheduleReconnect(let delay) = steps.last else {
            Issue.record("no reconnect after a lost connection: \(steps)")
            return
        }
        #expect(steps == [.report(.disconnected(error: lost, reconnectIn: delay)), .scheduleReconnect(after: delay)])
        #expect((0.8...1.2).contains(delay))
    }

    @Test("with several brokers the next one is tried at once; the backoff starts when each failed")
    func alternates() throws {
        var configuration = try Self.configuration()
        configuration.alternates = [MQTTEndpoint(host: "10.0.0.2", port: 1883)]
        var session = MQTTSession(configuration: configuration, seed: 1)
        #expect(session.connectAsked() == .attempt)
        #expect(Step.of(session.beginAttempt()).last == .connect(Self.broker))
        let refused = MQTTError(.library(14), "refused")
        #expect(Step.of(session.connectionEnded(refused)).last == .scheduleReconnect(after: 0.05))
        #expect(Step.of(session.reconnectDue()).last == .connect(MQTTEndpoint(host: "10.0.0.2", port: 1883)))
        // Both failed: connect() ends with the error; the next attempt starts at the first broker.
        #expect(Step.of(session.connectionEnded(refused)).last == .finishConnect(refused.kind))
        #expect(session.endpoint == Self.broker)
    }

    // MARK: Publishing

    @Test("QoS 0 fails while not connected; QoS 1 waits for the connection and goes out in order")
    func notConnected() throws {
        var session = try Self.session()
        let ledger = Ledger()
        #expect(session.admit(Self.message(0, qos: .atMostOnce), ledger.completion(0)) == .notConnected)
        _ = session.startAsked()
        _ = session.beginAttempt()
        #expect(session.admit(Self.message(1, qos: .atMostOnce), ledger.completion(1)) == .notConnected)
        for n in 2..<5 { #expect(session.admit(Self.message(n), ledger.completion(n)) == .queued) }
        #expect(session.nextToSend() == nil, "nothing goes out before CONNACK")

        #expect(
            Step.of(session.connected(reason: 0, sessionPresent: false, receiveMaximum: nil)).contains(
                .flushQueueAfterRead))
        #expect(Self.flush(&session, firstMid: 1) == ["m2", "m3", "m4"])
        #expect(session.admit(Self.message(5, qos: .atMostOnce), ledger.completion(5)) == .send)
    }

    @Test("a full QoS 1 window queues later publishes in order; beyond maxQueued they are refused, none dropped")
    func windowAndQueue() throws {
        var configuration = try Self.configuration()
        configuration.maxInflight = 2
        configuration.maxQueued = 3
        var session = MQTTSession(configuration: configuration, seed: 1)
        try Self.connect(&session)
        let ledger = Ledger()
        var sent: [String] = []
        var mid: Int32 = 0
        for n in 0..<7 {
            let message = Self.message(n)
            switch session.admit(message, ledger.completion(n)) {
            case .send:
                mid += 1
                session.handingOver()
                #expect(session.handedOver(mid: mid, rc: 0, qos: .atLeastOnce, ledger.completion(n)) == .pending)
                sent.append(message.payloadString)
            case .queued: break
            case let other: ledger.refused(n, other)
            }
        }
        #expect(sent == ["m0", "m1"], "two fill the window")
        #expect(session.queuedCount == 3 && session.inflight == 2)
        #expect(ledger.refusals == [5: .queueFull(waiting: 3), 6: .queueFull(waiting: 3)])
        #expect(session.nextToSend() == nil, "the window is full")

        // Each PUBACK makes room for the next queued one, in order.
        var acknowledged: Int32 = 0
        while acknowledged < mid {
            acknowledged += 1
            ledger.complete(session.acknowledged(mid: acknowledged, reason: 0))
            while let (message, completion) = session.nextToSend() {
                mid += 1
                session.handingOver()
                #expect(session.handedOver(mid: mid, rc: 0, qos: .atLeastOnce, completion) == .pending)
                sent.append(message.payloadString)
            }
        }
        #expect(sent == ["m0", "m1", "m2", "m3", "m4"])
        #expect(ledger.succeeded == [0, 1, 2, 3, 4])
        #expect(session.inflight == 0 && session.queuedCount == 0)
    }

    @Test("an MQTT 5 broker's Receive Maximum narrows the window; a connection without one restores maxInflight")
    func receiveMaximum() throws {
        var configuration = try Self.configuration()
        configuration.maxInflight = 10
        var session = MQTTSession(configuration: configuration, seed: 1)
        _ = session.startAsked()
        _ = session.beginAttempt()
        _ = session.connected(reason: 0, sessionPresent: false, receiveMaximum: 2)
        let ledger = Ledger()
        var admissions: [MQTTSession.Admission] = []
        for n in 0..<3 {
            let admission = session.admit(Self.message(n), ledger.completion(n))
            admissions.append(admission)
            if admission == .send {
                session.handingOver()
                _ = session.handedOver(mid: Int32(n + 1), rc: 0, qos: .atLeastOnce, ledger.completion(n))
            }
        }
        #expect(admissions == [.send, .send, .queued])
        // The broker went away with both unacknowledged (libmosquitto resends them); the next
        // one sends no Receive Maximum: the third goes out beside them.
        Self.reconnect(&session)
        _ = session.connected(reason: 0, sessionPresent: true, receiveMaximum: nil)
        #expect(Self.flush(&session, firstMid: 3) == ["m2"])
        #expect(session.inflight == 3)
    }

    @Test("publish callbacks complete in order, also when a message id is handed out again or comes inside the call")
    func acknowledgements() throws {
        var session = try Self.session()
        try Self.connect(&session)
        let ledger = Ledger()
        // Three QoS 0 publishes still unwritten when ids wrapped: 7 is handed out twice.
        for (n, mid) in [(0, Int32(7)), (1, 8), (2, 7)] {
            #expect(session.admit(Self.message(n, qos: .atMostOnce), ledger.completion(n)) == .send)
            session.handingOver()
            #expect(session.handedOver(mid: mid, rc: 0, qos: .atMostOnce, ledger.completion(n)) == .pending)
        }
        for mid: Int32 in [7, 8, 7] { ledger.complete(session.acknowledged(mid: mid, reason: 0)) }
        #expect(ledger.succeeded == [0, 1, 2])

        // Written inside mosquitto_publish_v5, before its id was known: done at once.
        session.handingOver()
        #expect(session.acknowledged(mid: 9, reason: 0).isNone)
        #expect(session.handedOver(mid: 9, rc: 0, qos: .atMostOnce, ledger.completion(3)) == .written)
        // A callback for an id nobody waits for changes nothing.
        #expect(session.acknowledged(mid: 9, reason: 0).isNone)

        // A QoS 1 publish the broker refuses (PUBACK 0x87) is done, with the code, and leaves the window.
        session.handingOver()
        #expect(session.handedOver(mid: 10, rc: 0, qos: .atLeastOnce, ledger.completion(4)) == .pending)
        #expect(session.inflight == 1)
        ledger.complete(session.acknowledged(mid: 10, reason: 0x87))
        #expect(ledger.failedCodes == [4: 0x87] && session.inflight == 0)
        // Refused by libmosquitto (no id): failed at once, nothing pending.
        session.handingOver()
        #expect(session.handedOver(mid: 0, rc: 14, qos: .atLeastOnce, ledger.completion(5)) == .failed)
        #expect(session.inflight == 0)
    }

    @Test("a lost connection fails the QoS 0 publishes not yet written and keeps QoS 1 for libmosquitto's resend")
    func lostConnectionFailsUnwrittenQoS0() throws {
        var session = try Self.session()
        try Self.connect(&session)
        let ledger = Ledger()
        for (n, qos, mid) in [(0, MQTTQoS.atMostOnce, Int32(1)), (1, .atLeastOnce, 2), (2, .atMostOnce, 3)] {
            _ = session.admit(Self.message(n, qos: qos), ledger.completion(n))
            session.handingOver()
            _ = session.handedOver(mid: mid, rc: 0, qos: qos, ledger.completion(n))
        }
        let actions = session.connectionEnded(MQTTError(.connectionLost, "lost"))
        for case .fail(let completions, let error) in actions {
            for completion in completions { completion?(.failure(error)) }
        }
        #expect(
            ledger.failedKinds.keys.sorted() == [0, 2] && ledger.failedKinds.values.allSatisfy { $0 == .connectionLost }
        )
        _ = session.reconnectDue()
        _ = session.connected(reason: 0, sessionPresent: true, receiveMaximum: nil)
        ledger.complete(session.acknowledged(mid: 2, reason: 0))
        #expect(ledger.succeeded == [1])
    }

    // MARK: Subscriptions

    @Test("subscriptions are sent again after a reconnect without the session, not with it (unless due)")
    func resubscribe() throws {
        var session = try Self.session()
        try Self.connect(&session)
        var mid: Int32 = 100
        func sent(_ request: MQTTSession.SubscribeRequest?) -> MQTTSession.SubscribeRequest? {
            if let request {
                mid += 1
                session.subscribeSent(request.filter, mid: mid)
                #expect(session.subscribeAcknowledged(mid: mid) == request.filter)
            }
            return request
        }
        #expect(
            sent(session.subscribe("a/+", id: 1, qos: .atLeastOnce, retainAsPublished: false, awaitsGrant: false))
                == .init(filter: "a/+", qos: .atLeastOnce, retainAsPublished: false))
        #expect(
            sent(session.subscribe("b", id: 2, qos: .atMostOnce, retainAsPublished: true, awaitsGrant: false))
                == .init(filter: "b", qos: .atMostOnce, retainAsPublished: true))
        #expect(
            session.subscribe("a/+", id: 3, qos: .exactlyOnce, retainAsPublished: false, awaitsGrant: false) == nil,
            "a second handler of a filter sends nothing")

        // Without the session: every filter, with its subscribers' highest QoS.
        Self.reconnect(&session)
        let restored = Self.subscribes(session.connected(reason: 0, sessionPresent: false, receiveMaximum: nil))
        #expect(
            Set(restored) == [
                .init(filter: "a/+", qos: .exactlyOnce, retainAsPublished: false),
                .init(filter: "b", qos: .atMostOnce, retainAsPublished: true),
            ])
        for request in restored { _ = sent(request) }

        // With the session: only what was added while away, or still waits for its grant.
        Self.reconnect(&session)
        #expect(session.subscribe("c", id: 4, qos: .atLeastOnce, retainAsPublished: false, awaitsGrant: false) == nil)
        #expect(session.subscribe("d", id: 5, qos: .atLeastOnce, retainAsPublished: false, awaitsGrant: true) == nil)
        #expect(
            Set(Self.subscribes(session.connected(reason: 0, sessionPresent: true, receiveMaximum: nil)).map(\.filter))
                == ["c", "d"])
        // d's SUBACK did not come before the connection was lost: d again, c not.
        Self.reconnect(&session)
        #expect(
            Self.subscribes(session.connected(reason: 0, sessionPresent: true, receiveMaximum: nil)).map(\.filter) == [
                "d"
            ])
        Self.reconnect(&session)
        #expect(
            Self.subscribes(session.connected(reason: 0, sessionPresent: true, receiveMaximum: nil)).map(\.filter) == [
                "d"
            ])
        _ = sent(session.subscribe("d", id: 6, qos: .atLeastOnce, retainAsPublished: false, awaitsGrant: true))
        Self.reconnect(&session)
        #expect(Self.subscribes(session.connected(reason: 0, sessionPresent: true, receiveMaximum: nil)).isEmpty)

        // The last subscriber of a filter leaving unsubscribes it; it is not restored.
        #expect(session.removeSubscriber(1, from: "a/+") == false, "another subscriber still uses a/+")
        #expect(session.removeSubscriber(3, from: "a/+") == true, "UNSUBSCRIBE now")
        Self.reconnect(&session)
        #expect(
            Set(Self.subscribes(session.connected(reason: 0, sessionPresent: false, receiveMaximum: nil)).map(\.filter))
                == ["b", "c", "d"])
    }

    // MARK: Disconnecting

    @Test("disconnect is final: what was not acknowledged fails, in order, and nothing starts again")
    func disconnectIsFinal() throws {
        var configuration = try Self.configuration()
        configuration.maxInflight = 1
        var session = MQTTSession(configuration: configuration, seed: 1)
        try Self.connect(&session)
        let ledger = Ledger()
        for n in 0..<3 {
            if session.admit(Self.message(n), ledger.completion(n)) == .send {
                session.handingOver()
                _ = session.handedOver(mid: Int32(n + 1), rc: 0, qos: .atLeastOnce, ledger.completion(n))
            }
        }
        #expect(session.disconnectAsked() == .sendDisconnect)
        #expect(session.admit(Self.message(3), ledger.completion(3)) == .closed)
        #expect(Step.of(session.connectionEnded(MQTTError(.connectionLost, "written"))) == [.closeFinished])
        let closed = session.close()
        let unfinished = try #require(closed)
        for completion in unfinished { completion?(.failure(MQTTError(.closed, "closed"))) }
        #expect(ledger.failedOrder == [0, 1, 2], "in flight first, then the queued ones in order")

        #expect(session.close() == nil)
        #expect(session.startAsked() == .closed && session.connectAsked() == .closed)
        #expect(session.disconnectAsked() == .alreadyClosed)
        #expect(Step.of(session.reconnectDue()).isEmpty)
        #expect(session.subscribe("x", id: 1, qos: .atMostOnce, retainAsPublished: false, awaitsGrant: false) == nil)
    }

    @Test("a disconnect while waiting to reconnect closes at once and the pending reconnect does nothing")
    func disconnectWhileWaiting() throws {
        var session = try Self.session()
        _ = session.startAsked()
        _ = session.beginAttempt()
        _ = session.connectionEnded(MQTTError(.library(14), "refused"))
        #expect(session.disconnectAsked() == .close)
        #expect(session.close()?.isEmpty == true)
        #expect(Step.of(session.reconnectDue()).isEmpty)
    }

    // MARK: Helpers

    static let broker = MQTTEndpoint(host: "192.0.2.1", port: 1883)
    static let policy = MQTTReconnectPolicy(minimumDelay: 1, maximumDelay: 30, multiplier: 2, jitter: 0.2)

    static func configuration() throws -> MQTTConfiguration {
        var configuration = try MQTTConfiguration(url: "mqtt://192.0.2.1", clientID: "session-test")
        configuration.reconnect = policy
        return configuration
    }

    static func session(seed: UInt64 = 1) throws -> MQTTSession {
        MQTTSession(configuration: try configuration(), seed: seed)
    }

    static func message(_ n: Int, qos: MQTTQoS = .atLeastOnce) -> MQTTMessage {
        MQTTMessage(topic: "t", string: "m\(n)", qos: qos)
    }

    /// start(), an attempt and CONNACK.
    static func connect(_ session: inout MQTTSession) throws {
        _ = session.startAsked()
        _ = session.beginAttempt()
        _ = session.connected(reason: 0, sessionPresent: false, receiveMaximum: nil)
        try #require(session.phase == .connected)
    }

    /// The connection is lost and the reconnect delay passes (CONNACK is the caller's).
    static func reconnect(_ session: inout MQTTSession) {
        _ = session.connectionEnded(MQTTError(.connectionLost, "lost"))
        _ = session.reconnectDue()
    }

    /// Hands the queued publishes over with ids from `firstMid`: their payloads, in order.
    static func flush(_ session: inout MQTTSession, firstMid: Int32) -> [String] {
        var mid = firstMid
        var sent: [String] = []
        while let (message, completion) = session.nextToSend() {
            session.handingOver()
            _ = session.handedOver(mid: mid, rc: 0, qos: message.qos, completion)
            mid += 1
            sent.append(message.payloadString)
        }
        return sent
    }

    static func subscribes(_ actions: [MQTTSession.Action]) -> [MQTTSession.SubscribeRequest] {
        actions.flatMap { action -> [MQTTSession.SubscribeRequest] in
            if case .subscribe(let requests) = action { return requests }
            return []
        }
    }
}

/// An action without its closures, to compare.
enum Step: Equatable {
    case connect(MQTTEndpoint)
    case connectionUp
    case scheduleReconnect(after: Double)
    case report(MQTTConnectionState)
    case finishConnect(MQTTError.Kind?)
    case fail(count: Int, MQTTError.Kind)
    case subscribe([MQTTSession.SubscribeRequest])
    case flushQueueAfterRead
    case closeFinished

    static func of(_ actions: [MQTTSession.Action]) -> [Step] {
        actions.map { action in
            switch action {
            case .connect(let endpoint): .connect(endpoint)
            case .connectionUp: .connectionUp
            case .scheduleReconnect(let delay): .scheduleReconnect(after: delay)
            case .report(let state): .report(state)
            case .finishConnect(let error): .finishConnect(error?.kind)
            case .fail(let completions, let error): .fail(count: completions.count, error.kind)
            case .subscribe(let requests): .subscribe(requests)
            case .flushQueueAfterRead: .flushQueueAfterRead
            case .closeFinished: .closeFinished
            }
        }
    }
}

extension MQTTSession.Acknowledgement {
    var isNone: Bool {
        if case .none = self { return true }
        return false
    }
}

/// Records which publish completed how, in the order the completions ran.
final class Ledger: Sendable {
    private let events = Mutex<[(n: Int, result: Result<Void, MQTTError>)]>([])
    private let admissions = Mutex<[Int: MQTTSession.Admission]>([:])

    func completion(_ n: Int) -> MQTTSession.Completion {
        { result in self.events.withLock { $0.append((n, result)) } }
    }

    /// Runs the completion of a publish callback as the client does.
    func complete(_ acknowledgement: MQTTSession.Acknowledgement) {
        guard case .done(let completion, let reason) = acknowledgement else {
            Issue.record("no publish completed")
            return
        }
        if reason >= 0x80 {
            completion?(.failure(MQTTError(.refused(MQTTReasonCode(rawValue: UInt8(reason))), "refused")))
        } else {
            completion?(.success(()))
        }
    }

    func refused(_ n: Int, _ admission: MQTTSession.Admission) { admissions.withLock { $0[n] = admission } }
    var refusals: [Int: MQTTSession.Admission] { admissions.withLock { $0 } }

    var succeeded: [Int] {
        events.withLock { $0.compactMap { if case .success = $0.result { $0.n } else { nil } } }
    }
    var failedOrder: [Int] {
        events.withLock { $0.compactMap { if case .failure = $0.result { $0.n } else { nil } } }
    }
    var failedKinds: [Int: MQTTError.Kind] {
        events.withLock {
            Dictionary(
                uniqueKeysWithValues: $0.compactMap {
                    if case .failure(let e) = $0.result { ($0.n, e.kind) } else { nil }
                })
        }
    }
    var failedCodes: [Int: UInt8] {
        failedKinds.compactMapValues { if case .refused(let code) = $0 { code.rawValue } else { nil } }
    }
}
