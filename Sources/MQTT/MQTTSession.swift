import FIFOQueue
import Retry

/// The MQTT client's decisions as a value: the connection phase, when to reconnect, the QoS 1/2
/// in-flight window and the queue behind it, which publish a libmosquitto callback completes,
/// and which subscriptions to send again after a reconnect.
///
/// A protocol state machine in the style of swift-nio's: each input (``startAsked()``,
/// ``connected(reason:sessionPresent:receiveMaximum:)``, ``connectionEnded(_:)``,
/// ``admit(_:_:)``, ``acknowledged(mid:reason:)``, ``disconnectAsked()``, …) is a mutating
/// method that updates the state and returns what the owner must do — connect now, schedule a
/// reconnect, hand a publish to libmosquitto, complete these publishes, send these SUBSCRIBEs,
/// tell the observers. It does no I/O and calls nothing: ``MQTTClient`` executes the actions with
/// ``MosquittoIO`` and keeps the observers and the subscriptions' sinks. The publish steps return
/// small enums (no action array per message: they are on every advertisement's path).
/// `package`, not public: the `mqtt-session` fuzz target (Tests/Fuzz) drives it directly.
package struct MQTTSession {
    package typealias Completion = @Sendable (Result<Void, MQTTError>) -> Void

    package enum Phase { case idle, connecting, connected, waiting, closing, closed }

    /// What the owner does after a connection input, in order.
    package enum Action {
        /// Start a connection attempt to this broker now (`mosquitto_connect_bind_async`); when it
        /// cannot even start, feed the failure back as ``connectionEnded(_:)``.
        case connect(MQTTEndpoint)
        /// The broker accepted the connection (the attempt's diagnostics can stop).
        case connectionUp
        /// Call ``reconnectDue()`` after this many seconds.
        case scheduleReconnect(after: Double)
        /// Make this the client's state and tell the observers.
        case report(MQTTConnectionState)
        /// `connect()`'s wait is over: nil when connected, else the failure to throw.
        case finishConnect(MQTTError?)
        /// Complete these publishes with this error.
        case fail([Completion?], MQTTError)
        /// Send these SUBSCRIBEs (then ``subscribeSent(_:mid:)`` or ``subscribeFailed(_:)``).
        case subscribe([SubscribeRequest])
        /// Hand the queued publishes to libmosquitto (``nextToSend()``) once the read that brought
        /// CONNACK is over: libmosquitto resends the unacknowledged ones first.
        case flushQueueAfterRead
        /// The DISCONNECT asked for is over (written, or the connection ended first).
        case closeFinished
    }

    /// One SUBSCRIBE: the filter, the highest QoS its subscribers asked for, and MQTT 5's
    /// retain-as-published option.
    package struct SubscribeRequest: Hashable {
        package var filter: String
        package var qos: MQTTQoS
        package var retainAsPublished: Bool
    }

    /// The answer to ``startAsked()`` and ``connectAsked()``.
    package enum StartDecision: Equatable {
        /// Nothing under way: set up and begin an attempt (``beginAttempt()``).
        case attempt
        /// An attempt is under way or a reconnect is scheduled.
        case underWay
        /// Already connected.
        case connected
        /// Closing or closed: ``MQTTClient/disconnect(timeout:)`` is final.
        case closed
    }

    /// The answer to ``disconnectAsked()``.
    package enum DisconnectDecision: Equatable {
        /// Already closing or closed: nothing to do.
        case alreadyClosed
        /// Connected: send DISCONNECT, wait for it to be written (the end of it is
        /// ``Action/closeFinished``), then ``close()``.
        case sendDisconnect
        /// Not connected: ``close()`` now.
        case close
    }

    /// What to do with a publish (``admit(_:_:)``).
    package enum Admission: Equatable {
        /// Hand it to libmosquitto now (``handingOver()``, then ``handedOver(mid:rc:qos:_:)``).
        case send
        /// It waits in the session's queue (in order) for a connection or room in the window.
        case queued
        /// Fail it: the client is closing or closed.
        case closed
        /// Fail it: QoS 0 while not connected.
        case notConnected
        /// Fail it: ``maxQueued`` publishes already wait (this many); none of them is dropped.
        case queueFull(waiting: Int)
    }

    /// What became of a publish libmosquitto was handed (``handedOver(mid:rc:qos:_:)``).
    package enum HandOver: Equatable {
        /// Waiting for its publish callback (PUBACK, PUBCOMP, or written for QoS 0).
        case pending
        /// Written inside the call (QoS 0): complete it with success.
        case written
        /// Refused (no message id, or a QoS 0 publish that failed): complete it with the error.
        case failed
    }

    /// A publish callback's outcome (``acknowledged(mid:reason:)``).
    package enum Acknowledgement {
        /// Not a publish the session waits for (written inside the publish call: noted for
        /// ``handedOver(mid:rc:qos:_:)``).
        case none
        /// Complete this publish: success, or refused when `reason` is 0x80 or more.
        case done(Completion?, reason: Int32)
    }

    /// A publish waiting for libmosquitto's publish callback, by message id. Ids wrap at 65,535
    /// and a QoS 0 message keeps its id until it is written, so a burst that outruns the socket
    /// can hand an id out again while it is still pending: such later publishes wait in `later`,
    /// in order, and the callbacks for that id complete them first to last.
    private struct Pending {
        var qos: MQTTQoS
        var completion: Completion?
        var later: [(qos: MQTTQoS, completion: Completion?)] = []

        /// This publish and those queued behind it, in order.
        var all: [(qos: MQTTQoS, completion: Completion?)] { [(qos, completion)] + later }

        /// The publishes after the first, as an entry of their own; nil when there are none.
        var rest: Pending? {
            guard let next = later.first else { return nil }
            return Pending(qos: next.qos, completion: next.completion, later: Array(later.dropFirst()))
        }
    }

    /// A topic filter's subscribers (by id, with the QoS each asked for) and what is due for it.
    private struct Subscription {
        var subscribers: [UInt64: MQTTQoS] = [:]
        /// Whether a subscriber asked for the retain flag as published (kept once asked).
        var retainAsPublished = false
        /// Added (or changed) while not connected: SUBSCRIBE is due at the next connection even
        /// when the broker kept the session.
        var needsSubscribe = false
        /// A subscriber waits for the broker's grant: SUBSCRIBE is sent again at the next
        /// connection even when the broker kept the session.
        var awaitingGrant = false
        var maxQoS: MQTTQoS { subscribers.values.max() ?? .atMostOnce }
    }

    package let configuration: MQTTConfiguration
    package private(set) var phase: Phase = .idle
    private var autoReconnect = false
    /// A `connect()` call waits for the outcome of its attempt (no automatic retry on failure).
    private var firstConnect = false
    package private(set) var attempt = 0
    /// The broker in ``MQTTConfiguration/endpoints`` the next attempt goes to, and how many
    /// attempts in a row failed since the last connection (with several brokers, each is tried
    /// once at once before the backoff applies).
    package private(set) var endpointIndex = 0
    private var failedInRow = 0
    private var backoff: ExponentialBackoff
    private var random: SplitMix64
    /// The broker's refusal of the current attempt (a CONNACK with a failure code), which the
    /// disconnect that follows reports.
    package private(set) var refusal: MQTTError?

    private var pending: [Int32: Pending] = [:]
    private var writtenDuringPublish: [Int32] = []
    private var publishing = false
    private var outbox = FIFO<(MQTTMessage, Completion?)>()
    /// QoS 1/2 publishes handed to libmosquitto and not yet acknowledged.
    package private(set) var inflight = 0
    /// ``MQTTConfiguration/maxInflight``, lowered by an MQTT 5 broker's Receive Maximum.
    package private(set) var inflightLimit: Int

    private var subscriptions: [String: Subscription] = [:]
    private var subscribeMids: [Int32: String] = [:]

    /// `seed` drives the reconnect delays' jitter (``MQTTReconnectPolicy``), so a test sees the
    /// same delays every run; the client seeds it at random.
    package init(configuration: MQTTConfiguration, seed: UInt64) {
        self.configuration = configuration
        backoff = ExponentialBackoff(configuration.reconnect.backoff)
        random = SplitMix64(seed: seed)
        inflightLimit = configuration.maxInflight
    }

    /// Closing or closed: no new work is taken.
    package var isClosed: Bool { phase == .closing || phase == .closed }

    /// The broker the current (or next) attempt goes to.
    package var endpoint: MQTTEndpoint {
        let endpoints = configuration.endpoints
        return endpoints[endpointIndex % endpoints.count]
    }

    /// QoS 1/2 publishes waiting in the session beyond the window or for a connection.
    package var queuedCount: Int { outbox.count }

    // MARK: Connection

    /// ``MQTTClient/start()``: keep trying until connected, and again after every lost connection.
    package mutating func startAsked() -> StartDecision {
        switch phase {
        case .closing, .closed: return .closed
        case .idle:
            autoReconnect = true
            return .attempt
        case .connected:
            autoReconnect = true
            return .connected
        case .connecting, .waiting:
            autoReconnect = true
            return .underWay
        }
    }

    /// ``MQTTClient/connect()``: one attempt whose failure ends the call (no retry); once
    /// connected, a lost connection is re-established.
    package mutating func connectAsked() -> StartDecision {
        switch phase {
        case .connected: return .connected
        case .closing, .closed: return .closed
        case .connecting, .waiting: return .underWay
        case .idle:
            autoReconnect = false
            firstConnect = true
            return .attempt
        }
    }

    /// Starts an attempt (after ``StartDecision/attempt``).
    package mutating func beginAttempt() -> [Action] {
        attempt += 1
        phase = .connecting
        refusal = nil
        return [.report(.connecting(attempt: attempt)), .connect(endpoint)]
    }

    /// The reconnect delay is over.
    package mutating func reconnectDue() -> [Action] {
        guard phase == .waiting else { return [] }
        return beginAttempt()
    }

    /// CONNACK (libmosquitto's connect callback): `reason` 0 is success, anything else the
    /// broker's refusal, which the disconnect that follows reports (``refusal``).
    package mutating func connected(reason: Int32, sessionPresent: Bool, receiveMaximum: Int?) -> [Action] {
        guard phase == .connecting else { return [] }
        guard reason == 0 else {
            let code =
                configuration.protocolVersion == .v5
                ? MQTTReasonCode(rawValue: UInt8(truncatingIfNeeded: reason))
                : MQTTReasonCode(connackV311: Int(reason))
            refusal = MQTTError.refused(code, "connect to \(endpoint)")
            return []
        }
        phase = .connected
        firstConnect = false
        attempt = 0
        failedInRow = 0
        backoff.reset()
        inflightLimit = min(configuration.maxInflight, receiveMaximum ?? configuration.maxInflight)
        subscribeMids.removeAll()
        // Sent before libmosquitto resends unacknowledged publishes (after the connect callback),
        // so the broker has our subscriptions again before those messages reach it.
        var restore: [SubscribeRequest] = []
        for (key, subscription) in subscriptions
        where !sessionPresent || subscription.awaitingGrant || subscription.needsSubscribe {
            restore.append(subscribing(key))
        }
        var actions: [Action] = [.connectionUp]
        if !restore.isEmpty { actions.append(.subscribe(restore)) }
        actions += [
            .flushQueueAfterRead, .report(.connected(sessionPresent: sessionPresent)), .finishConnect(nil),
        ]
        return actions
    }

    /// The connection ended (libmosquitto's disconnect callback, or a failed read, write or
    /// keepalive), or an attempt failed to start: retry with backoff, or end `connect()`'s wait.
    package mutating func connectionEnded(_ error: MQTTError) -> [Action] {
        switch phase {
        case .closing: return [.closeFinished]
        case .connected, .connecting: break
        case .idle, .waiting, .closed: return []
        }
        // With several brokers (a cluster's nodes) the next one is tried at once, until each
        // failed once in a row; then the backoff applies (and a first `connect()` fails).
        let endpoints = configuration.endpoints.count
        failedInRow += 1
        endpointIndex = (endpointIndex + 1) % endpoints
        let nextAtOnce = endpoints > 1 && failedInRow % endpoints != 0
        if firstConnect && !autoReconnect && !nextAtOnce {
            firstConnect = false
            phase = .idle
            return [.report(.disconnected(error: error, reconnectIn: nil)), .finishConnect(error)]
        }
        var actions: [Action] = []
        let lost = takeUnwrittenQoS0()
        if !lost.isEmpty {
            actions.append(
                .fail(lost, MQTTError(.connectionLost, "the connection was lost before the QoS 0 message was written")))
        }
        phase = .waiting
        if !firstConnect { autoReconnect = true }
        let delay = nextAtOnce ? 0.05 : backoff.next(random: random.unit())
        actions += [.report(.disconnected(error: error, reconnectIn: delay)), .scheduleReconnect(after: delay)]
        return actions
    }

    /// ``MQTTClient/disconnect(timeout:)``.
    package mutating func disconnectAsked() -> DisconnectDecision {
        guard !isClosed else { return .alreadyClosed }
        autoReconnect = false
        guard phase == .connected else { return .close }
        phase = .closing
        return .sendDisconnect
    }

    /// Final: returns every publish not completed — those libmosquitto holds, then the queued
    /// ones in order — for the owner to fail, and forgets the subscriptions. Nil when already
    /// closed.
    package mutating func close() -> [Completion?]? {
        guard phase != .closed else { return nil }
        phase = .closed
        autoReconnect = false
        var unfinished = pending.values.flatMap(\.all).map(\.completion)
        pending.removeAll()
        writtenDuringPublish.removeAll()
        unfinished += outbox.map(\.1)
        outbox.removeAll()
        inflight = 0
        subscriptions.removeAll()
        subscribeMids.removeAll()
        return unfinished
    }

    /// QoS 0 messages not yet written are dropped by libmosquitto on reconnect: their completions,
    /// to fail now. QoS 1/2 ones stay: libmosquitto resends them.
    private mutating func takeUnwrittenQoS0() -> [Completion?] {
        var lost: [Completion?] = []
        for (mid, entry) in pending where entry.all.contains(where: { $0.qos == .atMostOnce }) {
            let all = entry.all
            lost += all.filter { $0.qos == .atMostOnce }.map(\.completion)
            let kept = all.filter { $0.qos != .atMostOnce }
            pending[mid] = kept.first.map {
                Pending(qos: $0.qos, completion: $0.completion, later: Array(kept.dropFirst()))
            }
        }
        return lost
    }

    // MARK: Publishing (on every message's path: no allocation, small enums)

    /// A publish asked for: send it now, queue it, or refuse it.
    @inline(__always)
    package mutating func admit(_ message: MQTTMessage, _ completion: Completion?) -> Admission {
        switch phase {
        case .closed, .closing:
            return .closed
        case .connected where message.qos == .atMostOnce || (outbox.isEmpty && inflight < inflightLimit):
            return .send
        default:
            if message.qos == .atMostOnce { return .notConnected }
            if outbox.count >= configuration.maxQueued { return .queueFull(waiting: outbox.count) }
            outbox.append((message, completion))
            return .queued
        }
    }

    /// libmosquitto is about to be handed a publish: its publish callback can come inside that
    /// call, before the message id is known (``acknowledged(mid:reason:)`` notes it).
    @inline(__always)
    package mutating func handingOver() { publishing = true }

    /// The publish could not be handed over after all (its properties could not be built).
    @inline(__always)
    package mutating func handOverAborted() { publishing = false }

    /// libmosquitto took (or refused) the publish: `mid` its message id (0 when refused), `rc`
    /// its return code. A QoS 1/2 publish with an id and a failure code is queued by
    /// libmosquitto and resent after a reconnect.
    @inline(__always)
    package mutating func handedOver(mid: Int32, rc: Int32, qos: MQTTQoS, _ completion: Completion?) -> HandOver {
        publishing = false
        if mid == 0 || (rc != 0 && qos == .atMostOnce) {
            writtenDuringPublish.removeAll()
            return .failed
        }
        if qos != .atMostOnce { inflight += 1 }
        if !writtenDuringPublish.isEmpty, let index = writtenDuringPublish.firstIndex(of: mid) {
            writtenDuringPublish.remove(at: index)
            return .written
        }
        if pending[mid] != nil {
            pending[mid]!.later.append((qos, completion))
        } else {
            pending[mid] = Pending(qos: qos, completion: completion)
        }
        return .pending
    }

    /// libmosquitto's publish callback: PUBACK (QoS 1), PUBCOMP (QoS 2), or written (QoS 0).
    @inline(__always)
    package mutating func acknowledged(mid: Int32, reason: Int32) -> Acknowledgement {
        guard let entry = pending.removeValue(forKey: mid) else {
            if publishing { writtenDuringPublish.append(mid) }
            return .none
        }
        if let rest = entry.rest { pending[mid] = rest }
        if entry.qos != .atMostOnce { inflight -= 1 }
        return .done(entry.completion, reason: reason)
    }

    /// Whether queued publishes can go now (connected, and the queue is not empty).
    package var canFlush: Bool { phase == .connected && !outbox.isEmpty }

    /// The next queued publish to hand to libmosquitto, while connected and the window has room.
    @inline(__always)
    package mutating func nextToSend() -> (MQTTMessage, Completion?)? {
        guard phase == .connected && inflight < inflightLimit else { return nil }
        return outbox.popFirst()
    }

    // MARK: Subscriptions

    /// A subscriber of `filter` (``MQTTClient/subscribe(to:qos:retainAsPublished:)`` when
    /// `awaitsGrant`, the handler variant when not). Returns the SUBSCRIBE to send now, if any:
    /// when connected, always for one that awaits the grant, else when the filter is new or now
    /// asks for retain-as-published; when not connected, the filter's SUBSCRIBE is due at the
    /// next connection.
    package mutating func subscribe(
        _ filter: String, id: UInt64, qos: MQTTQoS, retainAsPublished: Bool, awaitsGrant: Bool
    ) -> SubscribeRequest? {
        let isNew = subscriptions[filter] == nil
        subscriptions[filter, default: Subscription()].subscribers[id] = qos
        let retainChanged = retainAsPublished && subscriptions[filter]?.retainAsPublished == false
        if retainAsPublished { subscriptions[filter]?.retainAsPublished = true }
        if awaitsGrant {
            subscriptions[filter]?.awaitingGrant = true
            return phase == .connected ? subscribing(filter) : nil
        }
        guard isNew || retainChanged else { return nil }
        if phase == .connected { return subscribing(filter) }
        subscriptions[filter]?.needsSubscribe = true
        return nil
    }

    /// The SUBSCRIBE for `filter` as it stands; no longer due at the next connection.
    private mutating func subscribing(_ filter: String) -> SubscribeRequest {
        subscriptions[filter]?.needsSubscribe = false
        let subscription = subscriptions[filter] ?? Subscription()
        return SubscribeRequest(
            filter: filter, qos: subscription.maxQoS,
            retainAsPublished: subscription.retainAsPublished && configuration.protocolVersion == .v5)
    }

    /// The SUBSCRIBE for `filter` went out with message id `mid`.
    package mutating func subscribeSent(_ filter: String, mid: Int32) { subscribeMids[mid] = filter }

    /// libmosquitto refused to send the SUBSCRIBE for `filter`: its waiting subscribers fail
    /// (the owner removes them with ``removeSubscriber(_:from:)``).
    package mutating func subscribeFailed(_ filter: String) { subscriptions[filter]?.awaitingGrant = false }

    /// SUBACK for `mid`: the filter it answers (its waiting subscribers are answered, granted or
    /// refused), or nil when it is not one the session waits for.
    package mutating func subscribeAcknowledged(mid: Int32) -> String? {
        guard let filter = subscribeMids.removeValue(forKey: mid), subscriptions[filter] != nil else { return nil }
        subscriptions[filter]?.awaitingGrant = false
        return filter
    }

    /// Removes a subscriber; true when it was the filter's last and the client is connected:
    /// UNSUBSCRIBE is due now (while not connected, the filter is not restored at the next
    /// connection, which is its unsubscription).
    package mutating func removeSubscriber(_ id: UInt64, from filter: String) -> Bool {
        guard subscriptions[filter]?.subscribers.removeValue(forKey: id) != nil else { return false }
        guard subscriptions[filter]?.subscribers.isEmpty == true else { return false }
        subscriptions[filter] = nil
        return phase == .connected
    }
}
