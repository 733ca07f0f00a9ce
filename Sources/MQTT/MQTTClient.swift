internal import CMosquitto
import EventLoop
import Retry
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
public actor MQTTClient: LoopIsolated {
    public nonisolated let configuration: MQTTConfiguration
    public nonisolated let loop: EventLoop
    public nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }

    /// The latest connection state (see ``connectionStates()`` for changes).
    public private(set) var state: MQTTConnectionState = .disconnected(error: nil, reconnectIn: nil)

    typealias Completion = @Sendable (Result<Void, MQTTError>) -> Void

    private enum Phase { case idle, connecting, connected, waiting, closing, closed }

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

    private struct FilterEntry {
        var filter: MQTTTopicFilter
        var subscribers: [UInt64: (qos: MQTTQoS, sink: Sink)] = [:]
        var waiters: [(id: UInt64, continuation: CheckedContinuation<MQTTQoS, any Error>)] = []
        /// Whether a subscriber asked for the retain flag as published (kept once asked).
        var retainAsPublished = false
        /// Added (or changed) while not connected: SUBSCRIBE is due at the next connection even
        /// when the broker kept the session.
        var needsSubscribe = false
        var maxQoS: MQTTQoS { subscribers.values.map(\.qos).max() ?? .atMostOnce }
    }

    private var handle: Mosquitto?
    private var phase: Phase = .idle
    private var autoReconnect = false
    private var attempt = 0
    /// The broker in ``MQTTConfiguration/endpoints`` the next attempt goes to, and how many
    /// attempts in a row failed since the last connection (with several brokers, each is tried
    /// once at once before the backoff applies).
    private var endpointIndex = 0
    private var failedInRow = 0
    private var backoff: ExponentialBackoff
    private var watch: (token: EventLoop.Token, fd: Int32, events: EventLoop.IOEvents)?
    private var abandonedFD: Int32 = -1
    private var prepareHook: EventLoop.Token?
    private var housekeeping: EventLoop.Token?
    private var reconnectTimer: EventLoop.Token?
    private var closeTimer: EventLoop.Token?
    private var connectWaiters: [CheckedContinuation<Void, any Error>] = []
    private var closeWaiters: [CheckedContinuation<Void, Never>] = []
    private var refusal: MQTTError?
    private var lastLogError: String?
    private var disconnectSeen = false
    /// A `connect()` call waits for the outcome of its attempt (no automatic retry on failure).
    private var firstConnect = false
    /// The failure of that attempt when it happened before `connect()` started waiting.
    private var firstConnectError: MQTTError?

    private var pending: [Int32: Pending] = [:]
    private var writtenDuringPublish: [Int32] = []
    private var publishing = false
    private var outbox = Outbox<(MQTTMessage, Completion?)>()
    private let queueFullPublishes = Atomic<Int>(0)
    private nonisolated let backlog = Backlog()
    /// Ids of handler subscriptions, made on any thread (the top bit keeps them apart from
    /// ``nextID``'s).
    private nonisolated let handlerIDs = Atomic<UInt64>(0)
    private var inflight = 0
    private var inflightLimit: Int
    private var flushAfterRead = false
    /// Publishes sent in this loop turn; from the second on the socket is corked, so the turn's
    /// publishes after the first leave together when it ends (``prepareForPoll()``).
    private var sentThisTurn = 0
    private var corked = false

    private var filters: [String: FilterEntry] = [:]
    private var subscribeMids: [Int32: String] = [:]
    private var unsubscribeWaiters: [Int32: CheckedContinuation<Void, Never>] = [:]
    private var nextID: UInt64 = 0
    private var observers: [UInt64: StateSink] = [:]

    /// Validates `configuration`; no connection is made and no task started until ``connect()``
    /// or ``start()``.
    public init(configuration: MQTTConfiguration, loop: EventLoop) throws(MQTTError) {
        try configuration.validate()
        self.configuration = configuration
        self.loop = loop
        backoff = ExponentialBackoff(configuration.reconnect.backoff)
        inflightLimit = configuration.maxInflight
    }

    /// Dropping a client without ``disconnect()`` closes the connection abruptly (the broker
    /// publishes the last will) and removes its loop watch, hook and timers on the loop thread.
    deinit {
        let loop = self.loop
        let tokens = [watch?.token, prepareHook, housekeeping, reconnectTimer, closeTimer].compactMap { $0 }
        loop.execute {
            for token in tokens {
                loop.removeWatch(token)
                loop.removePrepareHook(token)
                loop.cancelTimer(token)
            }
        }
    }

    // MARK: Connection

    /// Connects and waits for the broker's CONNACK. Throws the first attempt's failure (refused
    /// by the broker, TLS failure, nothing listening…) and then stays disconnected; once
    /// connected, a lost connection is re-established automatically until ``disconnect()``.
    public func connect() async throws(MQTTError) {
        switch phase {
        case .connected: return
        case .closing, .closed: throw Self.closedError
        case .connecting, .waiting:
            break
        case .idle:
            autoReconnect = false
            if handle == nil { try setUp() }
            firstConnect = true
            beginAttempt()
            if let error = firstConnectError {
                firstConnectError = nil
                throw error
            }
        }
        if phase == .connected { return }
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
        switch phase {
        case .closing, .closed: throw Self.closedError
        case .idle:
            autoReconnect = true
            if handle == nil { try setUp() }
            beginAttempt()
        default:
            autoReconnect = true
        }
    }

    /// Sends DISCONNECT (so the broker discards the last will), closes the socket and stops all
    /// loop watches and timers. Final: publishes not yet acknowledged fail with
    /// ``MQTTError/Kind/closed``, subscriptions and state streams finish. Waits at most
    /// `timeout` seconds (default two) for DISCONNECT to be written; when it is not, the socket
    /// is closed anyway (the broker then publishes the last will).
    public func disconnect(timeout: Double = 2) async {
        guard phase != .closed && phase != .closing else { return }
        autoReconnect = false
        cancelReconnectTimer()
        if phase == .connected, let handle {
            phase = .closing
            disconnectSeen = false
            _ = handle.disconnect()
            if !disconnectSeen && handle.socket >= 0 {
                closeTimer = loop.addTimer(after: max(0, timeout)) { [weak self] in
                    self?.assumeLoopIsolated { $0.resumeCloseWaiters() }
                }
                await withCheckedContinuation { closeWaiters.append($0) }
            }
        }
        tearDown()
    }

    /// A stream of connection state changes from now on (not the current ``state``).
    /// Buffers the newest 64 changes; finishes after ``disconnect()``. Callable from any thread.
    public nonisolated func connectionStates() -> AsyncStream<MQTTConnectionState> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: MQTTConnectionState.self, bufferingPolicy: .bufferingNewest(64))
        onLoop { client in
            if client.phase == .closed {
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
            guard client.phase != .closed else { return }
            client.nextID += 1
            client.observers[client.nextID] = .handler(handler)
        }
    }

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
    public var unacknowledgedCount: Int { inflight + outbox.count }

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
        guard phase != .closed && phase != .closing else { throw Self.closedError }
        nextID += 1
        let id = nextID
        let key = filter.rawValue
        let (stream, continuation) = AsyncStream.makeStream(of: MQTTMessage.self, bufferingPolicy: .unbounded)
        continuation.onTermination = { [weak self] _ in
            self?.onLoop { $0.removeSubscriber(id, key: key) }
        }
        filters[key, default: FilterEntry(filter: filter)].subscribers[id] = (qos, .stream(continuation))
        if retainAsPublished { filters[key]?.retainAsPublished = true }
        do {
            let granted = try await withCheckedThrowingContinuation { waiter in
                filters[key]?.waiters.append((id, waiter))
                if phase == .connected { sendSubscribe(key) }
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
            guard client.phase != .closed && client.phase != .closing else { return }
            let isNew = client.filters[key] == nil
            client.filters[key, default: FilterEntry(filter: filter)].subscribers[id] = (qos, .handler(handler))
            let retainChanged = retainAsPublished && client.filters[key]?.retainAsPublished == false
            if retainAsPublished { client.filters[key]?.retainAsPublished = true }
            guard isNew || retainChanged else { return }
            if client.phase == .connected {
                client.sendSubscribe(key)
            } else {
                client.filters[key]?.needsSubscribe = true
            }
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
        filters[key]?.subscribers[subscription.id]?.sink.finish()
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

    private func setUp() throws(MQTTError) {
        let config = configuration
        let handle = try Mosquitto(clientID: config.clientID, cleanSession: config.cleanSession)
        let v5 = config.protocolVersion == .v5
        try handle.setOption(
            MOSQ_OPT_PROTOCOL_VERSION, Int32(v5 ? MQTT_PROTOCOL_V5 : MQTT_PROTOCOL_V311),
            "MOSQ_OPT_PROTOCOL_VERSION")
        try handle.setOption(MOSQ_OPT_SEND_MAXIMUM, Int32(config.maxInflight), "MOSQ_OPT_SEND_MAXIMUM")
        try handle.setOption(MOSQ_OPT_TCP_NODELAY, 1, "MOSQ_OPT_TCP_NODELAY")
        if let credentials = config.credentials { try handle.setCredentials(credentials) }
        if let tls = config.tls { try handle.setTLS(tls) }
        if let will = config.will { try handle.setWill(will, version5: v5) }
        if v5, config.sessionExpiryInterval != nil || config.maximumPacketSize != nil {
            var properties = try PropertyList(
                sessionExpiry: config.sessionExpiryInterval, maximumPacketSize: config.maximumPacketSize)
            defer { properties.free() }
            try handle.storeConnectProperties(&properties)
        }
        handle.setUserData(Unmanaged.passUnretained(self).toOpaque())
        MQTTClient.installCallbacks(handle)
        self.handle = handle
        prepareHook = loop.addPrepareHook { [weak self] in self?.assumeLoopIsolated { $0.prepareForPoll() } }
        housekeeping = loop.addTimer(after: 1) { [weak self] in self?.assumeLoopIsolated { $0.housekeepingTick() } }
    }

    private func tearDown() {
        if phase == .closed { return }
        phase = .closed
        autoReconnect = false
        cancelReconnectTimer()
        if let token = closeTimer { loop.cancelTimer(token); closeTimer = nil }
        if let token = housekeeping { loop.cancelTimer(token); housekeeping = nil }
        if let token = prepareHook { loop.removePrepareHook(token); prepareHook = nil }
        if let watch { loop.removeWatch(watch.token) }
        watch = nil
        handle = nil  // mosquitto_destroy closes the socket
        let closed = Self.closedError
        for waiter in connectWaiters { waiter.resume(throwing: closed) }
        connectWaiters.removeAll()
        resumeCloseWaiters()
        let inFlight = pending.values.flatMap(\.all)
        pending.removeAll()
        for entry in inFlight { entry.completion?(.failure(closed)) }
        for (_, completion) in outbox.removeAll() { completion?(.failure(closed)) }
        inflight = 0
        for entry in filters.values {
            for subscriber in entry.subscribers.values { subscriber.sink.finish() }
            for waiter in entry.waiters { waiter.continuation.resume(throwing: closed) }
        }
        filters.removeAll()
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

    // MARK: Internals — connection attempts

    /// The broker the current (or next) attempt goes to.
    public var endpoint: MQTTEndpoint {
        let endpoints = configuration.endpoints
        return endpoints[endpointIndex % endpoints.count]
    }

    private func beginAttempt() {
        guard let handle else { return }
        reconnectTimer = nil
        attempt += 1
        phase = .connecting
        refusal = nil
        lastLogError = nil
        MQTTClient.setLogging(handle, true)
        setState(.connecting(attempt: attempt))
        let endpoint = self.endpoint
        do {
            try handle.connectAsync(
                host: endpoint.host, port: endpoint.port, keepAlive: configuration.keepAlive,
                bindAddress: configuration.bindAddress)
            syncWatch()
        } catch {
            attemptFailed(enrich(error))
        }
    }

    /// The connection ended or an attempt failed: retry with backoff, or report to `connect()`.
    private func attemptFailed(_ error: MQTTError) {
        syncWatch()
        if phase == .closing {
            resumeCloseWaiters()
            return
        }
        guard phase != .closed else { return }
        // With several brokers (a cluster's nodes) the next one is tried at once, until each
        // failed once in a row; then the backoff applies (and a first `connect()` fails).
        let endpoints = configuration.endpoints.count
        failedInRow += 1
        endpointIndex = (endpointIndex + 1) % endpoints
        let nextAtOnce = endpoints > 1 && failedInRow % endpoints != 0
        if firstConnect && !autoReconnect && !nextAtOnce {
            firstConnect = false
            phase = .idle
            setState(.disconnected(error: error, reconnectIn: nil))
            let waiters = connectWaiters
            connectWaiters.removeAll()
            if waiters.isEmpty { firstConnectError = error }
            for waiter in waiters { waiter.resume(throwing: error) }
            return
        }
        failUnwrittenQoS0()
        phase = .waiting
        if !firstConnect { autoReconnect = true }
        let delay = nextAtOnce ? 0.05 : backoff.next(random: Double.random(in: 0..<1))
        setState(.disconnected(error: error, reconnectIn: delay))
        reconnectTimer = loop.addTimer(after: delay) { [weak self] in
            self?.assumeLoopIsolated { client in
                if client.phase == .waiting { client.beginAttempt() }
            }
        }
    }

    /// QoS 0 messages not yet written are dropped by libmosquitto on reconnect; fail them now.
    private func failUnwrittenQoS0() {
        var lost: [Completion?] = []
        for (mid, entry) in pending where entry.all.contains(where: { $0.qos == .atMostOnce }) {
            let all = entry.all
            lost += all.filter { $0.qos == .atMostOnce }.map(\.completion)
            let kept = all.filter { $0.qos != .atMostOnce }
            pending[mid] = kept.first.map {
                Pending(qos: $0.qos, completion: $0.completion, later: Array(kept.dropFirst()))
            }
        }
        guard !lost.isEmpty else { return }
        let error = MQTTError(.connectionLost, "the connection was lost before the QoS 0 message was written")
        for completion in lost { completion?(.failure(error)) }
    }

    /// Adds TLS detail that libmosquitto only logged.
    private func enrich(_ error: MQTTError) -> MQTTError {
        guard let detail = lastLogError else { return error }
        if error.kind == .tls || detail.contains("OpenSSL") || detail.lowercased().contains("tls") {
            return MQTTError(.tls, "\(error.message): \(detail)")
        }
        return error
    }

    // MARK: Internals — socket

    /// Before each poll: follow libmosquitto's socket and ask for writability when it has bytes queued.
    private func prepareForPoll() {
        syncWatch()
        sentThisTurn = 0
        if corked {
            corked = false
            handle?.cork(false)
        }
        guard let handle, let current = watch else { return }
        var events: EventLoop.IOEvents = .readable
        if handle.wantsWrite { events.insert(.writable) }
        if events != current.events {
            loop.updateWatch(current.token, events: events)
            watch?.events = events
        }
    }

    private func syncWatch() {
        let fd = handle?.socket ?? -1
        if let current = watch, current.fd == fd { return }
        if let current = watch {
            loop.removeWatch(current.token)
            watch = nil
        }
        guard fd >= 0, fd != abandonedFD else { return }
        abandonedFD = -1
        let token = loop.addWatch(fd: fd, events: .readable) { [weak self] events in
            self?.assumeLoopIsolated { $0.socketReady(events, fd: fd) }
        }
        watch = (token, fd, .readable)
    }

    private func socketReady(_ events: EventLoop.IOEvents, fd: Int32) {
        guard let handle, handle.socket == fd else { return }
        disconnectSeen = false
        var rc: Int32 = 0
        if !events.isDisjoint(with: [.readable, .error, .hangup]) {
            rc = handle.loopRead()
        }
        if rc == 0, handle.socket == fd, events.contains(.writable) || handle.wantsWrite {
            rc = handle.loopWrite()
        }
        if rc != 0 && !disconnectSeen {
            // libmosquitto returns some failures (e.g. a TLS handshake error) without calling
            // on_disconnect; treat them as a lost connection and stop watching that socket.
            if handle.socket == fd { abandonedFD = fd }
            connectionEnded(MQTTError.library(rc, "connection to \(configuration.host):\(configuration.port)"))
        }
        if flushAfterRead {
            flushAfterRead = false
            flushOutbox()
        }
    }

    private func housekeepingTick() {
        guard let handle else { return }
        if handle.socket >= 0 {
            disconnectSeen = false
            let rc = handle.loopMisc()
            if rc != 0 && rc != Int32(MOSQ_ERR_NO_CONN.rawValue) && !disconnectSeen {
                connectionEnded(MQTTError.library(rc, "keepalive"))
            }
        }
        housekeeping = loop.addTimer(after: 1) { [weak self] in self?.assumeLoopIsolated { $0.housekeepingTick() } }
    }

    // MARK: Internals — publishing

    func submit(_ message: MQTTMessage, _ completion: Completion?) {
        switch phase {
        case .closed, .closing:
            completion?(.failure(Self.closedError))
        case .connected where message.qos == .atMostOnce || (outbox.isEmpty && inflight < inflightLimit):
            send(message, completion)
        default:
            if message.qos == .atMostOnce {
                completion?(
                    .failure(
                        MQTTError(
                            .notConnected,
                            "QoS 0 publish to \(message.topic) while not connected to \(configuration.host):\(configuration.port)"
                        )))
            } else if outbox.count >= configuration.maxQueued {
                queueFullPublishes.add(1, ordering: .relaxed)
                completion?(
                    .failure(
                        MQTTError(
                            .queueFull,
                            "publish to \(message.topic): \(outbox.count) messages already wait in the client (maxQueued \(configuration.maxQueued)); not queued"
                        )))
            } else {
                outbox.append((message, completion))
            }
        }
    }

    private func send(_ message: MQTTMessage, _ completion: Completion?) {
        guard let handle else {
            completion?(.failure(Self.closedError))
            return
        }
        var properties = PropertyList()
        if !message.properties.isEmpty {
            guard configuration.protocolVersion == .v5 else {
                completion?(
                    .failure(
                        MQTTError(
                            .invalidConfiguration,
                            "publish to \(message.topic): MQTT 5 properties need protocol version 5")))
                return
            }
            do {
                properties = try PropertyList(message.properties)
            } catch {
                completion?(.failure(error))
                return
            }
        }
        // The turn's publishes after its first leave in one segment at its end instead of one
        // each: the loopback (or network) transmit is most of a small publish's cost, and a
        // radio's reports often come several to a turn (docs/architecture.md). A lone publish
        // goes out at once, as before.
        sentThisTurn += 1
        if !corked, sentThisTurn == 2, phase == .connected { corked = handle.cork(true) }
        publishing = true
        let (mid, rc) = handle.publish(message, properties: properties.head)
        publishing = false
        properties.free()
        if mid == 0 || (rc != 0 && message.qos == .atMostOnce) {
            writtenDuringPublish.removeAll()
            completion?(.failure(MQTTError.library(rc, "publish to \(message.topic) (mosquitto_publish_v5)")))
            return
        }
        // rc != 0 with a message id for QoS 1/2: queued by libmosquitto, resent after reconnect.
        if message.qos != .atMostOnce { inflight += 1 }
        if !writtenDuringPublish.isEmpty, let index = writtenDuringPublish.firstIndex(of: mid) {
            writtenDuringPublish.remove(at: index)
            completion?(.success(()))
            return
        }
        if pending[mid] != nil {
            pending[mid]!.later.append((message.qos, completion))
        } else {
            pending[mid] = Pending(qos: message.qos, completion: completion)
        }
    }

    private func flushOutbox() {
        while phase == .connected && inflight < inflightLimit, let (message, completion) = outbox.popFirst() {
            send(message, completion)
        }
    }

    // MARK: Internals — subscriptions

    private func sendSubscribe(_ key: String) {
        guard let handle, let entry = filters[key] else { return }
        filters[key]?.needsSubscribe = false
        do {
            let mid = try handle.subscribe(
                key, qos: entry.maxQoS,
                retainAsPublished: entry.retainAsPublished && configuration.protocolVersion == .v5)
            subscribeMids[mid] = key
        } catch {
            failWaiters(key, error)
        }
    }

    private func failWaiters(_ key: String, _ error: MQTTError) {
        guard let entry = filters[key] else { return }
        for waiter in entry.waiters {
            filters[key]?.subscribers[waiter.id]?.sink.finish()
            filters[key]?.subscribers[waiter.id] = nil
            waiter.continuation.resume(throwing: error)
        }
        filters[key]?.waiters.removeAll()
        if filters[key]?.subscribers.isEmpty == true { filters[key] = nil }
    }

    /// Removes one subscriber; returns the UNSUBSCRIBE message id when one was sent.
    @discardableResult
    private func removeSubscriber(_ id: UInt64, key: String) -> Int32? {
        guard filters[key]?.subscribers.removeValue(forKey: id) != nil else { return nil }
        guard filters[key]?.subscribers.isEmpty == true else { return nil }
        filters[key] = nil
        guard phase == .connected, let handle else { return nil }
        return try? handle.unsubscribe(key)
    }

    // MARK: Callbacks (on the loop thread, inside libmosquitto calls)

    func connected(reason: Int32, flags: Int32, receiveMaximum: Int?) {
        guard phase == .connecting else { return }
        guard reason == 0 else {
            let code =
                configuration.protocolVersion == .v5
                ? MQTTReasonCode(rawValue: UInt8(truncatingIfNeeded: reason))
                : MQTTReasonCode(connackV311: Int(reason))
            refusal = MQTTError.refused(code, "connect to \(endpoint)")
            return
        }
        phase = .connected
        firstConnect = false
        attempt = 0
        failedInRow = 0
        if let handle { MQTTClient.setLogging(handle, false) }
        backoff.reset()
        inflightLimit = min(configuration.maxInflight, receiveMaximum ?? configuration.maxInflight)
        let sessionPresent = flags & 1 == 1
        subscribeMids.removeAll()
        // Queued before libmosquitto resends unacknowledged publishes (after this callback), so
        // the broker has our subscriptions again before those messages reach it.
        if !sessionPresent {
            for key in filters.keys { sendSubscribe(key) }
        } else {
            for (key, entry) in filters where !entry.waiters.isEmpty || entry.needsSubscribe { sendSubscribe(key) }
        }
        flushAfterRead = true
        setState(.connected(sessionPresent: sessionPresent))
        let waiters = connectWaiters
        connectWaiters.removeAll()
        for waiter in waiters { waiter.resume() }
    }

    func disconnected(reason: Int32) {
        disconnectSeen = true
        connectionEnded(
            refusal ?? enrich(MQTTError.library(reason, "connection to \(configuration.host):\(configuration.port)")))
    }

    private func connectionEnded(_ error: MQTTError) {
        for waiter in unsubscribeWaiters.values { waiter.resume() }
        unsubscribeWaiters.removeAll()
        let wasConnected = phase == .connected
        if phase == .connected || phase == .connecting || phase == .closing {
            if phase != .closing { phase = .waiting }
            _ = wasConnected
            attemptFailed(error)
        }
    }

    func published(mid: Int32, reason: Int32) {
        guard let entry = pending.removeValue(forKey: mid) else {
            if publishing { writtenDuringPublish.append(mid) }
            return
        }
        if let rest = entry.rest { pending[mid] = rest }
        if entry.qos != .atMostOnce { inflight -= 1 }
        if reason >= 0x80 {
            let code = MQTTReasonCode(rawValue: UInt8(truncatingIfNeeded: reason))
            entry.completion?(.failure(MQTTError.refused(code, "publish")))
        } else {
            entry.completion?(.success(()))
        }
        if !outbox.isEmpty && phase == .connected { flushOutbox() }
    }

    func received(_ message: MQTTMessage) {
        for entry in filters.values where entry.filter.matches(message.topic) {
            for subscriber in entry.subscribers.values { subscriber.sink.deliver(message) }
        }
    }

    func subscribed(mid: Int32, granted: [Int32]) {
        guard let key = subscribeMids.removeValue(forKey: mid), let entry = filters[key] else { return }
        let code = granted.first ?? 0x80
        if code >= 0x80 {
            let reason = MQTTReasonCode(rawValue: UInt8(truncatingIfNeeded: code))
            failWaiters(key, MQTTError.refused(reason, "subscribe to \(key)"))
            return
        }
        let qos = MQTTQoS(rawValue: Int(code)) ?? .atMostOnce
        filters[key]?.waiters.removeAll()
        for waiter in entry.waiters { waiter.continuation.resume(returning: qos) }
    }

    func unsubscribed(mid: Int32) {
        unsubscribeWaiters.removeValue(forKey: mid)?.resume()
    }

    func logged(level: Int32, _ text: String) {
        if level & Int32(MOSQ_LOG_ERR) != 0 { lastLogError = text }
    }
}

/// A shared counter (an `Atomic` cannot be captured by a completion closure).
final class Backlog: Sendable {
    private let value = Atomic<Int>(0)
    func increment() { value.add(1, ordering: .relaxed) }
    func decrement() { value.subtract(1, ordering: .relaxed) }
    var current: Int { value.load(ordering: .relaxed) }
}
