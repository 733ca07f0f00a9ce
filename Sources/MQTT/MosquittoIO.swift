internal import CMosquitto
import EventLoop

/// The libmosquitto side of one ``MQTTClient``: the handle (``Mosquitto``) set up from the
/// configuration, its socket as a loop watch served with `mosquitto_loop_read`/`_write`, a
/// one-second loop timer for `mosquitto_loop_misc` (keepalive), the prepare hook that follows
/// the socket and asks for writability, `TCP_CORK` for a turn's publishes, and libmosquitto's
/// callbacks.
///
/// It decides nothing: ``MQTTSession`` does, and ``MQTTClient`` executes the session's actions
/// with it. The callbacks run on the loop thread inside the libmosquitto calls made here and
/// enter the client with `assumeLoopIsolated` (EventLoop/LoopIsolated.swift); the watch, the
/// hook and the timer enter the client the same way. Not `Sendable`: owned by the client and
/// used only on its loop thread. Released (by ``MQTTClient/disconnect(timeout:)`` or with the
/// client), it destroys the handle, which closes the socket.
final class MosquittoIO {
    let handle: Mosquitto
    private let loop: EventLoop
    private let configuration: MQTTConfiguration
    /// Where the watch, the hook and the timer go (the client owns this object, so it outlives it).
    private unowned(unsafe) let client: MQTTClient
    private var watch: (token: EventLoop.Token, fd: Int32, events: EventLoop.IOEvents)?
    /// A socket libmosquitto gave up on without closing it yet: not watched again.
    private var abandonedFD: Int32 = -1
    private var prepareHook: EventLoop.Token?
    private var housekeeping: EventLoop.Token?
    /// Publishes sent in this loop turn; from the second on the socket is corked, so the turn's
    /// publishes after the first leave together when it ends (``prepareForPoll()``).
    private var sentThisTurn = 0
    private var corked = false
    /// libmosquitto's last error line during the current attempt (TLS detail it only logs).
    private var lastLogError: String?
    /// libmosquitto called the disconnect callback inside the current call.
    private var disconnectSeen = false

    /// `mosquitto_new` and the options, credentials, TLS, will and CONNECT properties of
    /// `configuration`; the callbacks go to `client`. Adds the prepare hook and the keepalive
    /// timer; no connection is made.
    init(configuration: MQTTConfiguration, client: MQTTClient, loop: EventLoop) throws(MQTTError) {
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
        handle.setUserData(Unmanaged.passUnretained(client).toOpaque())
        Self.installCallbacks(handle)
        self.handle = handle
        self.loop = loop
        self.configuration = configuration
        self.client = client
        // After the other hooks: a D-Bus dispatch in this prepare step publishes (corked from its
        // second message on), and what it wrote must leave before the loop sleeps.
        prepareHook = loop.addPrepareHook(last: true) { [weak client] in
            client?.assumeLoopIsolated { $0.prepareForPoll() }
        }
        armKeepalive()
    }

    /// Released without ``close()`` (the client was dropped): removes the watch, hook and timer
    /// on the loop thread.
    deinit {
        let tokens = [watch?.token, prepareHook, housekeeping].compactMap { $0 }
        guard !tokens.isEmpty else { return }
        let loop = self.loop
        loop.execute {
            for token in tokens {
                loop.removeWatch(token)
                loop.removePrepareHook(token)
                loop.cancelTimer(token)
            }
        }
    }

    /// Removes the watch, the hook and the timer (the handle goes when this object is released).
    func close() {
        if let token = housekeeping { loop.cancelTimer(token) }
        housekeeping = nil
        if let token = prepareHook { loop.removePrepareHook(token) }
        prepareHook = nil
        if let watch { loop.removeWatch(watch.token) }
        watch = nil
    }

    // MARK: Connecting

    /// Starts a non-blocking connect to `endpoint` (`mosquitto_connect_bind_async`) with
    /// libmosquitto's error log on, for the detail of a failure (``enrich(_:)``).
    func connect(to endpoint: MQTTEndpoint) throws(MQTTError) {
        lastLogError = nil
        Self.setLogging(handle, true)
        try handle.connectAsync(
            host: endpoint.host, port: endpoint.port, keepAlive: configuration.keepAlive,
            bindAddress: configuration.bindAddress)
        syncWatch()
    }

    /// The broker accepted the connection: libmosquitto's log goes off (see ``setLogging(_:_:)``).
    func connectionUp() { Self.setLogging(handle, false) }

    /// libmosquitto's disconnect callback came (inside the call under way).
    func noteDisconnect() { disconnectSeen = true }

    /// `mosquitto_disconnect_v5`; true when DISCONNECT is still to be written (the socket is
    /// open and libmosquitto has not reported the end of the connection).
    func sendDisconnect() -> Bool {
        disconnectSeen = false
        _ = handle.disconnect()
        return !disconnectSeen && handle.socket >= 0
    }

    /// Adds TLS detail that libmosquitto only logged.
    func enrich(_ error: MQTTError) -> MQTTError {
        guard let detail = lastLogError else { return error }
        if error.kind == .tls || detail.contains("OpenSSL") || detail.lowercased().contains("tls") {
            return MQTTError(.tls, "\(error.message): \(detail)")
        }
        return error
    }

    func logged(level: Int32, _ text: String) {
        if level & Int32(MOSQ_LOG_ERR) != 0 { lastLogError = text }
    }

    // MARK: The socket and the timer

    /// Before each poll: follow libmosquitto's socket, uncork what the turn wrote, and ask for
    /// writability when libmosquitto has bytes queued.
    func prepareForPoll() {
        syncWatch()
        sentThisTurn = 0
        if corked {
            corked = false
            handle.cork(false)
        }
        guard let current = watch else { return }
        var events: EventLoop.IOEvents = .readable
        if handle.wantsWrite { events.insert(.writable) }
        if events != current.events {
            loop.updateWatch(current.token, events: events)
            watch?.events = events
        }
    }

    /// Watches libmosquitto's current socket (and no longer a closed or abandoned one).
    func syncWatch() {
        let fd = handle.socket
        if let current = watch, current.fd == fd { return }
        if let current = watch {
            loop.removeWatch(current.token)
            watch = nil
        }
        guard fd >= 0, fd != abandonedFD else { return }
        abandonedFD = -1
        let client = self.client
        let token = loop.addWatch(fd: fd, events: .readable) { [weak client] events in
            client?.assumeLoopIsolated { $0.socketReady(events, fd: fd) }
        }
        watch = (token, fd, .readable)
    }

    /// Reads and writes what `events` allow on `fd`. Nil when `fd` is no longer the connection's
    /// socket; else 0, or the return code of a failure libmosquitto did not report with its
    /// disconnect callback (e.g. a TLS handshake error) — the socket is then no longer watched
    /// and the caller treats it as a lost connection.
    func service(_ events: EventLoop.IOEvents, fd: Int32) -> Int32? {
        guard handle.socket == fd else { return nil }
        disconnectSeen = false
        var rc: Int32 = 0
        if !events.isDisjoint(with: [.readable, .error, .hangup]) {
            rc = handle.loopRead()
        }
        if rc == 0, handle.socket == fd, events.contains(.writable) || handle.wantsWrite {
            rc = handle.loopWrite()
        }
        guard rc != 0 && !disconnectSeen else { return 0 }
        if handle.socket == fd { abandonedFD = fd }
        return rc
    }

    /// `mosquitto_loop_misc` (keepalive): the return code of a failure libmosquitto did not
    /// report with its disconnect callback, or nil.
    func keepalive() -> Int32? {
        guard handle.socket >= 0 else { return nil }
        disconnectSeen = false
        let rc = handle.loopMisc()
        guard rc != 0 && rc != Int32(MOSQ_ERR_NO_CONN.rawValue) && !disconnectSeen else { return nil }
        return rc
    }

    /// The keepalive timer, one second from now.
    func armKeepalive() {
        let client = self.client
        housekeeping = loop.addTimer(after: 1) { [weak client] in
            client?.assumeLoopIsolated { $0.housekeepingTick() }
        }
    }

    // MARK: Messages

    /// `mosquitto_publish_v5` (only while connected): the message id (0 when refused) and the
    /// return code. Throws for MQTT 5 properties that cannot be sent (3.1.1, or invalid).
    ///
    /// The turn's publishes after its first leave in one segment at its end instead of one
    /// each: the loopback (or network) transmit is most of a small publish's cost, and a
    /// radio's reports often come several to a turn (docs/architecture.md). A lone publish goes
    /// out at once.
    @inline(__always)
    func publish(_ message: MQTTMessage) throws(MQTTError) -> (mid: Int32, rc: Int32) {
        var properties = PropertyList()
        if !message.properties.isEmpty {
            guard configuration.protocolVersion == .v5 else {
                throw MQTTError(
                    .invalidConfiguration, "publish to \(message.topic): MQTT 5 properties need protocol version 5")
            }
            properties = try PropertyList(message.properties)
        }
        sentThisTurn += 1
        if !corked, sentThisTurn == 2 { corked = handle.cork(true) }
        let result = handle.publish(message, properties: properties.head)
        properties.free()
        return result
    }

    /// `mosquitto_subscribe_v5`: the SUBSCRIBE's message id.
    func subscribe(_ request: MQTTSession.SubscribeRequest) throws(MQTTError) -> Int32 {
        try handle.subscribe(request.filter, qos: request.qos, retainAsPublished: request.retainAsPublished)
    }

    /// `mosquitto_unsubscribe_v5`: the UNSUBSCRIBE's message id.
    func unsubscribe(_ filter: String) throws(MQTTError) -> Int32 { try handle.unsubscribe(filter) }

    // MARK: Callbacks (on the loop thread, inside libmosquitto calls)

    /// libmosquitto's C callbacks. They copy what they need out of libmosquitto's buffers and
    /// enter the client with `assumeLoopIsolated`; none blocks.
    private static func installCallbacks(_ handle: Mosquitto) {
        mosquitto_connect_v5_callback_set(handle.raw) { _, userdata, reason, flags, properties in
            let receiveMaximum = PropertyList.receiveMaximum(properties)
            MosquittoIO.client(userdata)?.assumeLoopIsolated {
                $0.connected(reason: reason, flags: flags, receiveMaximum: receiveMaximum)
            }
        }
        mosquitto_disconnect_v5_callback_set(handle.raw) { _, userdata, reason, _ in
            MosquittoIO.client(userdata)?.assumeLoopIsolated { $0.disconnected(reason: reason) }
        }
        mosquitto_publish_v5_callback_set(handle.raw) { _, userdata, mid, reason, _ in
            MosquittoIO.client(userdata)?.assumeLoopIsolated { $0.published(mid: mid, reason: reason) }
        }
        mosquitto_message_v5_callback_set(handle.raw) { _, userdata, message, properties in
            guard let message, let topic = message.pointee.topic else { return }
            let length = Int(max(0, message.pointee.payloadlen))
            let payload = message.pointee.payload.map { Array(UnsafeRawBufferPointer(start: $0, count: length)) } ?? []
            let copy = MQTTMessage(
                topic: String(cString: topic), payload: payload,
                qos: MQTTQoS(rawValue: Int(message.pointee.qos)) ?? .atMostOnce, retain: message.pointee.retain,
                properties: PropertyList.read(properties))
            MosquittoIO.client(userdata)?.assumeLoopIsolated { $0.received(copy) }
        }
        mosquitto_subscribe_v5_callback_set(handle.raw) { _, userdata, mid, count, granted, _ in
            let codes = granted.map { Array(UnsafeBufferPointer(start: $0, count: Int(max(0, count)))) } ?? []
            MosquittoIO.client(userdata)?.assumeLoopIsolated { $0.subscribed(mid: mid, granted: codes) }
        }
        mosquitto_unsubscribe_v5_callback_set(handle.raw) { _, userdata, mid, _ in
            MosquittoIO.client(userdata)?.assumeLoopIsolated { $0.unsubscribed(mid: mid) }
        }
        setLogging(handle, true)
    }

    /// libmosquitto's log callback, for the error detail (TLS) of a failed connection attempt:
    /// on while connecting, off once connected. libmosquitto formats every log line — one per
    /// packet sent — before it calls the callback, whatever the level, so leaving it on would
    /// cost a `malloc` and a `vsnprintf` per publish.
    private static func setLogging(_ handle: Mosquitto, _ on: Bool) {
        guard on else {
            mosquitto_log_callback_set(handle.raw, nil)
            return
        }
        mosquitto_log_callback_set(handle.raw) { _, userdata, level, text in
            guard level & Int32(MOSQ_LOG_ERR) != 0, let text else { return }
            let copy = String(cString: text)
            MosquittoIO.client(userdata)?.assumeLoopIsolated { $0.logged(level: level, copy) }
        }
    }

    /// The client registered as libmosquitto user data. The pointer is unretained: the handle is
    /// destroyed when this object goes, before the client does, and callbacks only run inside
    /// calls the client makes.
    private static func client(_ userdata: UnsafeMutableRawPointer?) -> MQTTClient? {
        guard let userdata else { return nil }
        return Unmanaged<MQTTClient>.fromOpaque(userdata).takeUnretainedValue()
    }
}
