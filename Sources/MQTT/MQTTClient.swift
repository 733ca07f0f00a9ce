import EventLoop
import Synchronization

/// An MQTT 3.1.1/5 client over libmosquitto, driven by an ``EventLoop``.
///
/// The actor runs on the loop's thread (its `unownedExecutor` is the loop), which owns the
/// libmosquitto handle: the socket is a loop watch served with `mosquitto_loop_read`/`_write`, a
/// one-second loop timer runs `mosquitto_loop_misc` (keepalive), and libmosquitto's callbacks
/// arrive on the loop thread inside those calls and enter the actor with `assumeLoopIsolated` (EventLoop/LoopIsolated.swift).
///
/// Life cycle: ``connect()`` (first attempt must succeed) or ``start()`` (keep trying), then
/// automatic reconnection with ``MQTTReconnectPolicy`` backoff until ``disconnect()``, which is
/// final. After a reconnect the client re-subscribes every live subscription unless the broker
/// kept the session; QoS 1/2 publishes that were not acknowledged are resent by libmosquitto
/// (with DUP) and complete when acknowledged.
///
/// Publishing: ``publish(_:completion:)`` is non-async and callable from any thread (cheapest
/// on the loop thread); the completion runs on the loop thread when the broker acknowledged
/// (PUBACK for QoS 1, PUBCOMP for QoS 2) or, for QoS 0, when the message was written to the
/// socket. At most ``MQTTConfiguration/maxInflight`` QoS 1/2 messages are unacknowledged; later
/// ones wait in order in the client, also while disconnected, up to
/// ``MQTTConfiguration/maxQueued``; a publish beyond that fails at once with
/// ``MQTTError/Kind/queueFull`` (nothing already queued is dropped). QoS 0 publishes fail with
/// ``MQTTError/Kind/notConnected`` while disconnected.
///
/// Inside, three parts: ``MQTTSession``, a value-type state machine, makes every decision (the
/// connection phase, when to reconnect, the in-flight window and queue, which publish a
/// callback completes, which subscriptions to send again) and returns them as actions;
/// ``MosquittoIO`` holds the libmosquitto handle, the socket watch, the keepalive timer,
/// `TCP_CORK` and the callbacks; the actor feeds the session what the API and the callbacks
/// report, executes its actions with the I/O, and keeps the state observers and the
/// subscriptions' sinks.
public actor MQTTClient: LoopIsolated {
    public nonisolated let configuration: MQTTConfiguration
    public nonisolated let loop: EventLoop
    public nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }

    /// The latest connection state (see ``connectionStates()`` for changes).
    public private(set) var state: MQTTConnectionState = .disconnected(error: nil, reconnectIn: nil)

    typealias Completion = MQTTSession.Completion

    /// Where a subscription's messages go: a stream (``subscribe(to:qos:retainAsPublished:)``)
    /// or a handler called on the loop thread (``subscribe(to:qos:retainAsPublished:handler:)``).
    enum Sink {
        case stream(AsyncStream<MQTTMessage>.Continuation)
        case handler(@Sendable (MQTTMessage) -> Void)

        func deliver(_ message: MQTTMessage) {
            switch self {
            case .stream(let continuation): continuation.yield(message)
            case .handler(let handler): handler(message)
            }
        }

        func finish() {
            if case .stream(let continuation) = self { continuation.finish() }
        }
    }

    /// Where connection states go (``connectionStates()`` or ``observeConnectionStates(_:)``).
    enum StateSink {
        case stream(AsyncStream<MQTTConnectionState>.Continuation)
        case handler(@Sendable (MQTTConnectionState) -> Void)
    }

    /// A topic filter's subscribers on this side: where its messages go and the async
    /// subscribers waiting for SUBACK (the session keeps what the broker must be sent).
    private struct Route {
        var filter: MQTTTopicFilter
        var sinks: [UInt64: Sink] = [:]
        var waiters: [(id: UInt64, continuation: CheckedContinuation<MQTTQoS, any Error>)] = []
    }

    /// The connection phase, reconnect decisions, publish bookkeeping and subscriptions to
    /// restore (no I/O: ``MQTTSession``).
    private var session: MQTTSession
    /// The libmosquitto handle, socket watch, keepalive timer and cork; nil before the first
    /// ``connect()`` or ``start()`` and after ``disconnect()``.
    private var io: MosquittoIO?
    private var reconnectTimer: EventLoop.Token?
    private var closeTimer: EventLoop.Token?
    private var connectWaiters: [CheckedContinuation<Void, any Error>] = []
    private var closeWaiters: [CheckedContinuation<Void, Never>] = []
    /// The failure of `connect()`'s attempt when it happened before `connect()` started waiting.
    private var firstConnectError: MQTTError?
    /// Hand the queued publishes over once the read under way is done (after CONNACK).
    private var flushAfterRead = false

    private let queueFullPublishes = Atomic<Int>(0)
    private nonisolated let backlog = Backlog()
    /// Ids of handler subscriptions, made on any thread (the top bit keeps them apart from
    /// ``nextID``'s).
    private nonisolated let handlerIDs = Atomic<UInt64>(0)

    private var routes: [String: Route] = [:]
    private var unsubscribeWaiters: [Int32: CheckedContinuation<Void, Never>] = [:]
    private var nextID: UInt64 = 0
    private var observers: [UInt64: StateSink] = [:]

    /// Validates `configuration`; no connection is made and no task started until ``connect()``
    /// or ``start()``.
    public init(configuration: MQTTConfiguration, loop: EventLoop) throws(MQTTError) {
        try configuration.validate()
        self.configuration = configuration
        self.loop = loop
        session = MQTTSession(configuration: configuration, seed: UInt64.random(in: .min ... .max))
    }

    /// Dropping a client without ``disconnect()`` closes the connection abruptly (the broker
    /// publishes the last will) and removes its loop watch, hook and timers on the loop thread
    /// (``MosquittoIO`` removes its own).
    deinit {
        let loop = self.loop
        let tokens = [reconnectTimer, closeTimer].compactMap { $0 }
        guard !tokens.isEmpty else { return }
        loop.execute {
            for token in tokens { loop.cancelTimer(token) }
        }
    }

    // MARK: Connection

    /// Connects and waits for the broker's CONNACK. Throws the first attempt's failure (refused
    /// by the broker, TLS failure, nothing listening…) and then stays disconnected; once
    /// connected, a lost connection is re-established automatically until ``disconnect()``.
    public func connect() async throws(MQTTError) {
        switch session.connectAsked() {
        case .connected: return
        case .closed: throw Self.closedError
        case .underWay: break
        case .attempt:
            try setUpIfNeeded()
            run(session.beginAttempt())
            if let error = firstConnectError {
                firstConnectError = nil
                throw error
            }
        }
        if session.phase == .connected { return }
        do {
            try await withCheckedThrowingContinuation { connectWaiters.append($0) }
        } catch let error as MQTTError {
            throw error
        } catch {
            throw MQTTError(.connectionLost, "connect failed: \(error)")
        }
    }

    /// Starts connecting in the background and keeps trying with backoff until connected, and
    /// again after every lost connection, until ``disconnect()``. Progress and failures are
    /// reported by ``connectionStates()``. Throws only for a configuration libmosquitto rejects.
    public func start() throws(MQTTError) {
        switch session.startAsked() {
        case .closed: throw Self.closedError
        case .connected, .underWay: return
        case .attempt:
            try setUpIfNeeded()
            run(session.beginAttempt())
        }
    }

    /// Sends DISCONNECT (so the broker discards the last will), closes the socket and stops all
    /// loop watches and timers. Final: publishes not yet acknowledged fail with
    /// ``MQTTError/Kind/closed``, subscriptions and state streams finish. Waits at most
    /// `timeout` seconds (default two) for DISCONNECT to be written; when it is not, the socket
    /// is closed anyway (the broker then publishes the last will).
    public func disconnect(timeout: Double = 2) async {
        let decision = session.disconnectAsked()
        guard decision != .alreadyClosed else { return }
        cancelReconnectTimer()
        if decision == .sendDisconnect, let io, io.sendDisconnect() {
            closeTimer = loop.addTimer(after: max(0, timeout)) { [weak self] in
                self?.assumeLoopIsolated { $0.resumeCloseWaiters() }
            }
            await withCheckedContinuation { closeWaiters.append($0) }
        }
        tearDown()
    }

    /// A stream of connection state changes from now on (not the current ``state``).
    /// Buffers the newest 64 changes; finishes after ``disconnect()``. Callable from any thread.
    public nonisolated func connectionStates() -> AsyncStream<MQTTConnectionState> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: MQTTConnectionState.self, bufferingPolicy: .bufferingNewest(64))
        onLoop { client in
            if client.session.phase == .closed {
                continuation.finish()
                return
            }
            client.nextID += 1
            let id = client.nextID
            client.observers[id] = .stream(continuation)
            continuation.onTermination = { [weak client] _ in
                client?.onLoop { $0.observers[id] = nil }
            }
        }
        return stream
    }

    /// Calls `handler` on the loop thread with every connection state change from now on, inside
    /// the libmosquitto call that caused it (no task, no buffer), until ``disconnect()``.
    /// Callable from any thread (from another thread, changes before the registration reached
    /// the loop are not reported).
    public nonisolated func observeConnectionStates(_ handler: @escaping @Sendable (MQTTConnectionState) -> Void) {
        onLoop { client in
            guard client.session.phase != .closed else { return }
            client.nextID += 1
            client.observers[client.nextID] = .handler(handler)
        }
    }

    /// The broker the current (or next) attempt goes to.
    public var endpoint: MQTTEndpoint { session.endpoint }

    // MARK: Publishing

    /// Publishes `message` and calls `completion` on the loop thread when it is done: QoS 0 when
    /// written to the socket, QoS 1 on PUBACK, QoS 2 on PUBCOMP, or with an ``MQTTError``.
    /// Callable from any thread; no task is created.
    public nonisolated func publish(
        _ message: MQTTMessage, completion: (@Sendable (Result<Void, MQTTError>) -> Void)? = nil
    ) {
        let completion = counted(message, completion)
        if loop.inLoop {
            assumeLoopIsolated { $0.submit(message, completion) }
        } else {
            loop.execute { [self] in assumeLoopIsolated { $0.submit(message, completion) } }
        }
    }

    /// QoS 1/2 publishes are counted from the caller's thread, so ``backlogCount`` already
    /// includes those still on their way to the loop thread; every path completes exactly once.
    private nonisolated func counted(_ message: MQTTMessage, _ completion: Completion?) -> Completion? {
        guard message.qos != .atMostOnce else { return completion }
        backlog.increment()
        let backlog = self.backlog
        return { result in
            backlog.decrement()
            completion?(result)
        }
    }

    /// Publishes `message` and returns when the broker acknowledged it (see
    /// ``publish(_:completion:)`` for what "done" means per QoS).
    public func publish(_ message: MQTTMessage) async throws(MQTTError) {
        let result = await withCheckedContinuation { continuation in
            submit(message) { continuation.resume(returning: $0) }
        }
        try result.get()
    }

    /// QoS 1/2 publishes refused with ``MQTTError/Kind/queueFull`` so far (readable from any thread).
    public nonisolated var queueFullCount: Int { queueFullPublishes.load(ordering: .relaxed) }

    /// Number of QoS 1/2 publishes sent and not yet acknowledged, plus those waiting in the client.
    public var unacknowledgedCount: Int { session.inflight + session.queuedCount }

    /// QoS 1/2 publishes handed to ``publish(_:completion:)`` that have not completed yet (in
    /// flight, waiting in the client, or on their way to the loop thread). Readable from any
    /// thread; a caller that keeps it below ``MQTTConfiguration/maxQueued`` is never refused with
    /// ``MQTTError/Kind/queueFull``.
    public nonisolated var backlogCount: Int { backlog.current }

    // MARK: Subscribing

    /// Subscribes to `filter` and returns once the broker granted it (SUBACK). Messages that
    /// arrive from then on — including retained ones sent right after SUBACK — are in the
    /// returned sequence. While disconnected, the SUBSCRIBE is sent when the connection is up.
    ///
    /// `retainAsPublished` (MQTT 5's subscription option; ignored with protocol 3.1.1): a
    /// message published with the retain flag keeps it when delivered live too, not only when
    /// the broker replays it at subscription — so a receiver can tell retained publications
    /// apart either way. Once a subscriber of a filter asks for it, the filter keeps it.
    public func subscribe(to filter: MQTTTopicFilter, qos: MQTTQoS = .atLeastOnce, retainAsPublished: Bool = false)
        async throws(MQTTError) -> MQTTSubscription
    {
        guard !session.isClosed else { throw Self.closedError }
        nextID += 1
        let id = nextID
        let key = filter.rawValue
        let (stream, continuation) = AsyncStream.makeStream(of: MQTTMessage.self, bufferingPolicy: .unbounded)
        continuation.onTermination = { [weak self] _ in
            self?.onLoop { $0.removeSubscriber(id, key: key) }
        }
        routes[key, default: Route(filter: filter)].sinks[id] = .stream(continuation)
        do {
            let granted = try await withCheckedThrowingContinuation { waiter in
                routes[key]?.waiters.append((id, waiter))
                let request = session.subscribe(
                    key, id: id, qos: qos, retainAsPublished: retainAsPublished, awaitsGrant: true)
                if let request { sendSubscribe(request) }
            }
            return MQTTSubscription(filter: filter, grantedQoS: granted, id: id, stream: stream)
        } catch let error as MQTTError {
            throw error
        } catch {
            throw MQTTError(.connectionLost, "subscribe to \(key) failed: \(error)")
        }
    }

    /// Subscribes to `filter` and calls `handler` on the loop thread with every matching message,
    /// inside the read that received it: no task, no buffer, so nothing queues between the
    /// socket and the handler (which must not block). Returns at once, without waiting for the
    /// broker: SUBSCRIBE goes out now when connected, else when the connection is up, and again
    /// after each reconnect without a kept session. Lasts until ``unsubscribe(_:)`` or
    /// ``disconnect()``. Callable from any thread; from another thread the registration reaches
    /// the loop on its next turn.
    ///
    /// `retainAsPublished` as for ``subscribe(to:qos:retainAsPublished:)``.
    public nonisolated func subscribe(
        to filter: MQTTTopicFilter, qos: MQTTQoS = .atLeastOnce, retainAsPublished: Bool = false,
        handler: @escaping @Sendable (MQTTMessage) -> Void
    ) -> MQTTHandlerSubscription {
        let id = handlerIDs.wrappingAdd(1, ordering: .relaxed).newValue | (1 << 63)
        let key = filter.rawValue
        onLoop { client in
            guard !client.session.isClosed else { return }
            client.routes[key, default: Route(filter: filter)].sinks[id] = .handler(handler)
            let request = client.session.subscribe(
                key, id: id, qos: qos, retainAsPublished: retainAsPublished, awaitsGrant: false)
            if let request { client.sendSubscribe(request) }
        }
        return MQTTHandlerSubscription(filter: filter, id: id)
    }

    /// Ends a handler subscription: its handler is not called again, and if no other
    /// subscription uses the filter the client sends UNSUBSCRIBE (without waiting for UNSUBACK).
    public nonisolated func unsubscribe(_ subscription: MQTTHandlerSubscription) {
        let key = subscription.filter.rawValue
        onLoop { client in client.removeSubscriber(subscription.id, key: key) }
    }

    /// Ends `subscription`: its sequence finishes, and if no other subscription uses the same
    /// filter the client sends UNSUBSCRIBE and waits for UNSUBACK (when connected).
    public func unsubscribe(_ subscription: MQTTSubscription) async {
        let key = subscription.filter.rawValue
        routes[key]?.sinks[subscription.id]?.finish()
        if let mid = removeSubscriber(subscription.id, key: key) {
            await withCheckedContinuation { unsubscribeWaiters[mid] = $0 }
        }
    }

    /// Subscribes, runs `body` with the subscription, and unsubscribes when `body` returns or
    /// throws — the subscription never outlives the call.
    public nonisolated func withSubscription<Result: Sendable>(
        to filter: MQTTTopicFilter, qos: MQTTQoS = .atLeastOnce,
        _ body: (MQTTSubscription) async throws -> Result
    ) async throws -> Result {
        let subscription = try await subscribe(to: filter, qos: qos)
        do {
            let result = try await body(subscription)
            await unsubscribe(subscription)
            return result
        } catch {
            await unsubscribe(subscription)
            throw error
        }
    }

    // MARK: Internals — set-up and tear-down

    private static let closedError = MQTTError(
        .closed, "the MQTT client was disconnected (disconnect() is final; make a new client)")

    /// Runs `body` isolated on the loop thread: now if already there, else on the next turn.
    nonisolated func onLoop(_ body: @escaping @Sendable (isolated MQTTClient) -> Void) {
        if loop.inLoop {
            assumeLoopIsolated { body($0) }
        } else {
            loop.execute { [self] in assumeLoopIsolated { body($0) } }
        }
    }

    private func setUpIfNeeded() throws(MQTTError) {
        if io == nil { io = try MosquittoIO(configuration: configuration, client: self, loop: loop) }
    }

    private func tearDown() {
        guard let unfinished = session.close() else { return }
        cancelReconnectTimer()
        if let token = closeTimer {
            loop.cancelTimer(token)
            closeTimer = nil
        }
        io?.close()
        io = nil  // mosquitto_destroy closes the socket
        let closed = Self.closedError
        for waiter in connectWaiters { waiter.resume(throwing: closed) }
        connectWaiters.removeAll()
        resumeCloseWaiters()
        for completion in unfinished { completion?(.failure(closed)) }
        for route in routes.values {
            for sink in route.sinks.values { sink.finish() }
            for waiter in route.waiters { waiter.continuation.resume(throwing: closed) }
        }
        routes.removeAll()
        for waiter in unsubscribeWaiters.values { waiter.resume() }
        unsubscribeWaiters.removeAll()
        setState(.disconnected(error: nil, reconnectIn: nil))
        for case .stream(let observer) in observers.values { observer.finish() }
        observers.removeAll()
    }

    private func resumeCloseWaiters() {
        for waiter in closeWaiters { waiter.resume() }
        closeWaiters.removeAll()
    }

    private func cancelReconnectTimer() {
        if let token = reconnectTimer { loop.cancelTimer(token) }
        reconnectTimer = nil
    }

    private func setState(_ new: MQTTConnectionState) {
        state = new
        for observer in observers.values {
            switch observer {
            case .stream(let continuation): continuation.yield(new)
            case .handler(let handler): handler(new)
            }
        }
    }

    // MARK: Internals — the session's actions

    /// Executes what the session decided, in order.
    private func run(_ actions: [MQTTSession.Action]) {
        for action in actions {
            switch action {
            case .connect(let endpoint):
                reconnectTimer = nil
                guard let io else { continue }
                do {
                    try io.connect(to: endpoint)
                } catch {
                    connectionEnded(io.enrich(error))
                }
            case .connectionUp:
                io?.connectionUp()
            case .scheduleReconnect(let delay):
                reconnectTimer = loop.addTimer(after: delay) { [weak self] in
                    self?.assumeLoopIsolated { $0.run($0.session.reconnectDue()) }
                }
            case .report(let state):
                setState(state)
            case .finishConnect(let error):
                let waiters = connectWaiters
                connectWaiters.removeAll()
                if let error {
                    if waiters.isEmpty { firstConnectError = error }
                    for waiter in waiters { waiter.resume(throwing: error) }
                } else {
                    for waiter in waiters { waiter.resume() }
                }
            case .fail(let completions, let error):
                for completion in completions { completion?(.failure(error)) }
            case .subscribe(let requests):
                for request in requests { sendSubscribe(request) }
            case .flushQueueAfterRead:
                flushAfterRead = true
            case .closeFinished:
                resumeCloseWaiters()
            }
        }
    }

    /// The connection ended or an attempt failed: UNSUBACKs will not come; the session decides
    /// what follows.
    private func connectionEnded(_ error: MQTTError) {
        for waiter in unsubscribeWaiters.values { waiter.resume() }
        unsubscribeWaiters.removeAll()
        io?.syncWatch()
        run(session.connectionEnded(error))
    }

    // MARK: Internals — the socket and the timer (entered from MosquittoIO's watch, hook, timer)

    func prepareForPoll() { io?.prepareForPoll() }

    func socketReady(_ events: EventLoop.IOEvents, fd: Int32) {
        guard let io, let rc = io.service(events, fd: fd) else { return }
        if rc != 0 {
            // libmosquitto returns some failures (e.g. a TLS handshake error) without calling
            // on_disconnect; treat them as a lost connection (the socket is no longer watched).
            connectionEnded(MQTTError.library(rc, "connection to \(configuration.host):\(configuration.port)"))
        }
        if flushAfterRead {
            flushAfterRead = false
            flushQueue()
        }
    }

    func housekeepingTick() {
        guard let io else { return }
        if let rc = io.keepalive() { connectionEnded(MQTTError.library(rc, "keepalive")) }
        self.io?.armKeepalive()
    }

    // MARK: Internals — publishing

    @inline(__always)
    func submit(_ message: MQTTMessage, _ completion: Completion?) {
        switch session.admit(message, completion) {
        case .send:
            send(message, completion)
        case .queued:
            break
        case .closed:
            completion?(.failure(Self.closedError))
        case .notConnected:
            completion?(
                .failure(
                    MQTTError(
                        .notConnected,
                        "QoS 0 publish to \(message.topic) while not connected to \(configuration.host):\(configuration.port)"
                    )))
        case .queueFull(let waiting):
            queueFullPublishes.add(1, ordering: .relaxed)
            completion?(
                .failure(
                    MQTTError(
                        .queueFull,
                        "publish to \(message.topic): \(waiting) messages already wait in the client (maxQueued \(configuration.maxQueued)); not queued"
                    )))
        }
    }

    @inline(__always)
    private func send(_ message: MQTTMessage, _ completion: Completion?) {
        guard let io else {
            completion?(.failure(Self.closedError))
            return
        }
        let mid: Int32
        let rc: Int32
        session.handingOver()
        do {
            (mid, rc) = try io.publish(message)
        } catch {
            session.handOverAborted()
            completion?(.failure(error))
            return
        }
        switch session.handedOver(mid: mid, rc: rc, qos: message.qos, completion) {
        case .pending:
            break
        case .written:
            completion?(.success(()))
        case .failed:
            completion?(.failure(MQTTError.library(rc, "publish to \(message.topic) (mosquitto_publish_v5)")))
        }
    }

    private func flushQueue() {
        while let (message, completion) = session.nextToSend() {
            send(message, completion)
        }
    }

    // MARK: Internals — subscriptions

    private func sendSubscribe(_ request: MQTTSession.SubscribeRequest) {
        guard let io else { return }
        do {
            session.subscribeSent(request.filter, mid: try io.subscribe(request))
        } catch {
            session.subscribeFailed(request.filter)
            failWaiters(request.filter, error)
        }
    }

    private func failWaiters(_ key: String, _ error: MQTTError) {
        guard let route = routes[key] else { return }
        for waiter in route.waiters {
            routes[key]?.sinks[waiter.id]?.finish()
            routes[key]?.sinks[waiter.id] = nil
            _ = session.removeSubscriber(waiter.id, from: key)
            waiter.continuation.resume(throwing: error)
        }
        routes[key]?.waiters.removeAll()
        if routes[key]?.sinks.isEmpty == true { routes[key] = nil }
    }

    /// Removes one subscriber; returns the UNSUBSCRIBE message id when one was sent.
    @discardableResult
    private func removeSubscriber(_ id: UInt64, key: String) -> Int32? {
        guard routes[key]?.sinks.removeValue(forKey: id) != nil else { return nil }
        if routes[key]?.sinks.isEmpty == true { routes[key] = nil }
        guard session.removeSubscriber(id, from: key), let io else { return nil }
        return try? io.unsubscribe(key)
    }

    // MARK: Callbacks (on the loop thread, inside libmosquitto calls: MosquittoIO)

    func connected(reason: Int32, flags: Int32, receiveMaximum: Int?) {
        run(session.connected(reason: reason, sessionPresent: flags & 1 == 1, receiveMaximum: receiveMaximum))
    }

    func disconnected(reason: Int32) {
        guard let io else { return }
        io.noteDisconnect()
        connectionEnded(
            session.refusal
                ?? io.enrich(MQTTError.library(reason, "connection to \(configuration.host):\(configuration.port)")))
    }

    @inline(__always)
    func published(mid: Int32, reason: Int32) {
        guard case .done(let completion, let code) = session.acknowledged(mid: mid, reason: reason) else { return }
        if code >= 0x80 {
            let code = MQTTReasonCode(rawValue: UInt8(truncatingIfNeeded: code))
            completion?(.failure(MQTTError.refused(code, "publish")))
        } else {
            completion?(.success(()))
        }
        if session.canFlush { flushQueue() }
    }

    func received(_ message: MQTTMessage) {
        for route in routes.values where route.filter.matches(message.topic) {
            for sink in route.sinks.values { sink.deliver(message) }
        }
    }

    func subscribed(mid: Int32, granted: [Int32]) {
        guard let key = session.subscribeAcknowledged(mid: mid), let route = routes[key] else { return }
        let code = granted.first ?? 0x80
        if code >= 0x80 {
            let reason = MQTTReasonCode(rawValue: UInt8(truncatingIfNeeded: code))
            failWaiters(key, MQTTError.refused(reason, "subscribe to \(key)"))
            return
        }
        let qos = MQTTQoS(rawValue: Int(code)) ?? .atMostOnce
        routes[key]?.waiters.removeAll()
        for waiter in route.waiters { waiter.continuation.resume(returning: qos) }
    }

    func unsubscribed(mid: Int32) {
        unsubscribeWaiters.removeValue(forKey: mid)?.resume()
    }

    func logged(level: Int32, _ text: String) { io?.logged(level: level, text) }
}

/// A shared counter (an `Atomic` cannot be captured by a completion closure).
final class Backlog: Sendable {
    private let value = Atomic<Int>(0)
    func increment() { value.add(1, ordering: .relaxed) }
    func decrement() { value.subtract(1, ordering: .relaxed) }
    var current: Int { value.load(ordering: .relaxed) }
}
