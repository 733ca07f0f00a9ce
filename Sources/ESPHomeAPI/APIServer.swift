import Bluetooth
import EventLoop
import LocalSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Severity of the server's log lines (the composition root maps it to its logger).
public enum APIServerLogLevel: Sendable {
    case debug, info, notice, warning, error
}

/// The listening socket could not be set up.
public struct APIServerError: Error, CustomStringConvertible, Sendable {
    public var call: String
    public var code: Int32

    public var description: String { "\(call): \(String(cString: strerror(code)))" }
}

/// The ESPHome native API server: a nonblocking TCP listener on the event loop, one
/// ``APITransport`` and session per client (docs/ha-bluetooth-proxy.md).
///
/// Session: (Noise handshake) → HelloRequest → anything: DeviceInfo, ListEntities (answered with
/// Done: a proxy has no entities), Ping, Disconnect, the Bluetooth subscriptions. A message other
/// than HelloRequest first, a malformed frame or protobuf, a frame over ``APIServerConfiguration/maxFrame``,
/// no handshake within ``APIServerConfiguration/handshakeTimeout`` or silence for
/// ``APIServerConfiguration/idleTimeout`` close the connection, each counted in ``statistics``.
/// Each client's unsent bytes are bounded by ``APIServerConfiguration/maxQueuedBytes``: a client
/// that does not read is disconnected, so memory never grows with it.
///
/// With a ``BluetoothProxyBackend`` and `connectionSlots` above 0 it also serves connections
/// through the proxy (ProxyConnections.swift): connect, disconnect, GATT by handle, notifications,
/// the connections-free count, pairing, unpairing and clearing the cache; each connection owned by
/// the client that made it, all of them within the slots (and the budget the backend shares), and
/// released when that client goes.
///
/// Advertisements given to ``forward(_:)`` are batched (at most 16 per message) and sent at the
/// end of the loop turn they arrived in, to every client subscribed to them.
///
/// Loop-thread only, like every other user of the loop: the invariant behind `@unchecked Sendable`.
public final class APIServer: @unchecked Sendable {
    /// The configuration new sessions get (its key changes when a client sets one).
    public private(set) var configuration: APIServerConfiguration
    let loop: EventLoop
    let log: @Sendable (APIServerLogLevel, String) -> Void
    private var listenFD: Int32 = -1
    private var listenToken: EventLoop.Token?
    private var tickToken: EventLoop.Token?
    var clients: [Int: Client] = [:]
    private var nextClientID = 0
    private var pending: [ServerMessage.RawAdvertisement] = []
    private var flushScheduled = false
    private var readBuffer = [UInt8](repeating: 0, count: 4096)

    /// The counters (loop thread).
    public internal(set) var statistics = APIServerStatistics()
    /// The port bound by ``start()`` (the configured one, or the one chosen for port 0).
    public private(set) var port: UInt16 = 0
    /// What BluetoothScannerStateResponse reports; changes are sent to subscribed clients.
    public var scannerState: BluetoothScannerState = .running {
        didSet { if scannerState != oldValue { broadcastScannerState() } }
    }
    /// The mode the scan runs in now (active: BlueZ's discovery, which asks for scan responses;
    /// passive: the kernel's monitor scan); changes are sent to subscribed clients.
    public var scannerMode: BluetoothScannerMode = .active {
        didSet { if scannerMode != oldValue { broadcastScannerState() } }
    }
    /// The mode `bluetooth.scan_mode` configures (auto: passive, its resting mode).
    public var configuredScannerMode: BluetoothScannerMode = .active {
        didSet { if configuredScannerMode != oldValue { broadcastScannerState() } }
    }
    /// Called on the loop thread with each BluetoothScannerSetModeRequest's mode.
    public var scannerModeRequested: ((BluetoothScannerMode) -> Void)?
    /// Called on the loop thread after a client set or forgot the key (the mDNS record changes
    /// with it: provisioned or not).
    public var keyChanged: ((APIServerConfiguration) -> Void)?
    /// Where a key a client sets is kept (with ``APIServerConfiguration/provisioning``).
    let keyStore: APIKeyStore?
    /// Seconds from a key change to the DisconnectRequest sent to every client (ESPHome: 0.1 s,
    /// after the set-key's answer went out), and from there to closing those that stay.
    static let keyChangeDisconnectDelay = 0.1
    static let keyChangeCloseDelay = 2.0

    /// The largest number of advertisements in one BluetoothLERawAdvertisementsResponse.
    public static let batchSize = 16
    /// The API version gattway speaks (HelloResponse).
    public static let apiVersion = (major: UInt32(1), minor: UInt32(14))

    /// What serves connections through the proxy (nil: none are served).
    let backend: (any BluetoothProxyBackend)?
    /// The connections through the proxy, by device address (at most `connectionSlots`).
    var proxyConnections: [UInt64: ProxyConnection] = [:]
    var nextConnectionID = 0
    /// Pair, unpair and clear-cache requests waiting for the backend: the client that asked, by
    /// device (one at a time per device, at most ``maxInFlight`` at once).
    var deviceRequests: [UInt64: Int] = [:]
    /// The connections-free message last sent to subscribers (a change is sent, a repeat is not).
    var lastConnectionsFree: ServerMessage?
    var slotsBroadcastScheduled = false

    /// - Parameter backend: serves connections through the proxy; they are announced (feature
    ///   flags) and served only with one and `connectionSlots` above 0.
    /// - Parameter keyStore: keeps the key a client sets, with `configuration.provisioning`
    ///   (without one every set-key is refused).
    public init(
        configuration: APIServerConfiguration, loop: EventLoop, backend: (any BluetoothProxyBackend)? = nil,
        keyStore: APIKeyStore? = nil, log: @escaping @Sendable (APIServerLogLevel, String) -> Void
    ) {
        var configuration = configuration
        // Remote caching too: aioesphomeapi only connects with the V3 requests it implies (the
        // client keeps the services; BlueZ keeps its own cache, so both V3 variants connect alike).
        // Pairing (pair, unpair) and cache clearing are the backend's too.
        let served: BluetoothProxyFeatures = [.activeConnections, .remoteCaching, .pairing, .cacheClearing]
        if backend != nil, configuration.connectionSlots > 0 {
            configuration.features.formUnion(served)
        } else {
            configuration.features.subtract(served)
        }
        self.configuration = configuration
        self.loop = loop
        self.backend = backend
        self.keyStore = keyStore
        self.log = log
    }

    // MARK: Listener

    /// Binds and listens; loop thread. Throws the failing call and its errno.
    public func start() throws(APIServerError) {
        loop.preconditionInLoop()
        let fd = socket(
            AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw APIServerError(call: "socket", code: errno) }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = configuration.port.bigEndian
        guard inet_pton(AF_INET, configuration.host, &address.sin_addr) == 1 else {
            close(fd)
            throw APIServerError(call: "inet_pton(\(configuration.host))", code: EINVAL)
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else {
            let code = errno
            close(fd)
            throw APIServerError(call: "bind \(configuration.host):\(configuration.port)", code: code)
        }
        guard listen(fd, 16) == 0 else {
            let code = errno
            close(fd)
            throw APIServerError(call: "listen", code: code)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        port = UInt16(bigEndian: address.sin_port)
        listenFD = fd
        listenToken = loop.addWatch(fd: fd, events: .readable) { [unowned self] _ in self.acceptClients() }
        scheduleTick()
    }

    /// Says goodbye (DisconnectRequest) to every client and closes everything; loop thread.
    public func stop() {
        loop.preconditionInLoop()
        for client in Array(clients.values) {
            releaseConnections(of: client.id)
            if client.session.phase == .connected { client.session.send(.empty(MessageType.disconnectRequest)) }
            flush(client)
            drop(client, nil)
        }
        if let listenToken { loop.removeWatch(listenToken) }
        listenToken = nil
        if let tickToken { loop.cancelTimer(tickToken) }
        tickToken = nil
        if listenFD >= 0 { Glibc.close(listenFD) }
        listenFD = -1
    }

    private func acceptClients() {
        while true {
            var address = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let fd = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    accept(listenFD, $0, &length)
                }
            }
            guard fd >= 0 else {
                // Out of file descriptors: the pending connection stays queued and the socket
                // readable, so accepting is paused for a second rather than retried every turn.
                if errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM {
                    pauseAccepting()
                }
                return  // EAGAIN: all taken
            }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            followKeyStore()
            var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
            inet_ntop(AF_INET, &address.sin_addr, &text, socklen_t(INET_ADDRSTRLEN))
            let host = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let peer = "\(host):\(UInt16(bigEndian: address.sin_port))"
            guard clients.count < configuration.maxClients else {
                statistics.refusedFull += 1
                warn("API: refused \(peer): \(configuration.maxClients) clients connected (max_clients)")
                Glibc.close(fd)
                continue
            }
            var one: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            let id = nextClientID
            nextClientID += 1
            let client = Client(
                id: id, fd: fd, peer: peer, now: EventLoop.now(), session: APISession(configuration: configuration))
            client.token = loop.addWatch(fd: fd, events: .readable) { [unowned self] events in
                self.handleEvents(id, events)
            }
            clients[id] = client
            statistics.accepted += 1
            statistics.clients = clients.count
            log(.debug, "API: \(peer) connected")
        }
    }

    /// Warnings about what clients do (refused, malformed, wrong key) go through a budget, so a
    /// flood of bad connections cannot flood the log: 20 at once, then one per 3 s; the next line
    /// says how many were held back. Every one is counted in ``statistics`` all the same.
    private var warningBudget = 20.0
    private var warningBudgetAt = EventLoop.now()
    private var warningsHeld = 0

    private func warn(_ line: String) {
        let now = EventLoop.now()
        warningBudget = min(20, warningBudget + Double(now &- warningBudgetAt) / 3e9)
        warningBudgetAt = now
        guard warningBudget >= 1 else {
            warningsHeld += 1
            return
        }
        warningBudget -= 1
        log(.warning, line + (warningsHeld > 0 ? " (\(warningsHeld) similar lines held back)" : ""))
        warningsHeld = 0
    }

    private func pauseAccepting() {
        guard let listenToken else { return }
        log(.warning, "API: cannot accept connections (\(String(cString: strerror(errno)))); pausing for 1 s")
        loop.updateWatch(listenToken, events: [])
        _ = loop.addTimer(after: 1) { [weak self] in
            guard let self, let token = self.listenToken else { return }
            self.loop.updateWatch(token, events: .readable)
        }
    }

    // MARK: Per client

    private func handleEvents(_ id: Int, _ events: EventLoop.IOEvents) {
        guard let client = clients[id] else { return }
        if events.contains(.writable) { flush(client) }
        guard clients[id] != nil else { return }
        if !client.held.isEmpty {
            // Not reading (its requests wait): a hang-up is not read, it ends the client.
            if events.contains(.hangup) || events.contains(.error) { drop(client, "closed by the client") }
            return
        }
        if events.contains(.readable) || events.contains(.hangup) || events.contains(.error) { read(client) }
    }

    /// The events a client's socket is watched for: readable unless its requests wait
    /// (back-pressure: the client's writes stay in the kernel's buffers, then in its own), and
    /// writable while bytes wait to be sent.
    func updateWatch(_ client: Client) {
        guard let token = client.token else { return }
        let reading = client.held.isEmpty
        let writing = client.pendingBytes > 0
        guard reading != client.watchingReads || writing != client.watchingWrites else { return }
        client.watchingReads = reading
        client.watchingWrites = writing
        var events: EventLoop.IOEvents = reading ? .readable : []
        if writing { events.insert(.writable) }
        loop.updateWatch(token, events: events)
    }

    private func read(_ client: Client) {
        // A bounded number of reads per readiness keeps one busy client from starving the loop.
        for _ in 0..<16 {
            let count = readBuffer.withUnsafeMutableBytes { Glibc.read(client.fd, $0.baseAddress, $0.count) }
            if count == 0 {
                drop(client, "closed by the client")
                return
            }
            if count < 0 {
                if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { return }
                drop(client, "read: \(String(cString: strerror(errno)))")
                return
            }
            client.lastHeard = EventLoop.now()
            client.pinged = false
            receive(client, readBuffer[0..<count])
            // Requests held back (ProxyConnections.swift): nothing more is read until they are served.
            guard clients[client.id] != nil, !client.session.closing, client.held.isEmpty else { return }
        }
    }

    /// Feeds a client's bytes through its session, counts and logs what ended it, sends the answers.
    private func receive(_ client: Client, _ bytes: ArraySlice<UInt8>) {
        let outcome = client.session.receive(bytes, scanner: scannerStatus)
        for line in outcome.debug { log(.debug, "API: \(client.peer): \(line)") }
        if let hello = outcome.hello {
            client.hello = (hello.info, "\(hello.major).\(hello.minor)")
            log(.info, "API: \(client.peer) (\(hello.info), API \(hello.major).\(hello.minor)) connected")
        }
        switch outcome.failure {
        case .handshakeRefused?:
            statistics.handshakeFailures += 1
            warn("API: \(client.peer): Noise handshake refused (wrong encryption key?)")
        case .oversize(let size)?:
            statistics.oversizeFrames += 1
            warn("API: \(client.peer): frame of \(size) bytes over the limit")
        case .protocolError(let text)?:
            statistics.protocolErrors += 1
            warn("API: \(client.peer): \(text)")
        case .plaintextProbe?:
            // Home Assistant's config flow tries plaintext before it asks for the key: expected.
            statistics.plaintextProbes += 1
            log(
                .info,
                "API: \(client.peer): a plaintext hello (a client without the encryption key, such as Home Assistant's "
                    + "first try when adding the device); told that this proxy requires encryption")
        case .zeroKeyProbe?:
            // Home Assistant's config flow reads the node name this way before asking for the key.
            statistics.zeroKeyProbes += 1
            log(
                .info,
                "API: \(client.peer): a Noise handshake with the all-zero key (a client without the key reading "
                    + "this proxy's name, such as Home Assistant when adding the device); refused")
        case .passwordRefused?:
            statistics.passwordsRefused += 1
            warn(
                "API: \(client.peer): sent a password; gattway has none (its clients authenticate with "
                    + "bluetooth_proxy.encryption_key): answered invalid_password and closed")
        case nil:
            break
        }
        if let mode = outcome.scannerModeRequest {
            log(.info, "API: \(client.peer) asked for the \(mode == .active ? "active" : "passive") scanner mode")
            scannerModeRequested?(mode)
        }
        if let key = outcome.setKey { setKey(key, for: client) }
        for request in outcome.proxyRequests {
            guard clients[client.id] != nil, !client.session.closing else { break }
            if client.held.isEmpty, !mustWait(request, for: client) {
                serve(request, for: client)
            } else {
                client.held.append(request)
            }
        }
        if !client.held.isEmpty, clients[client.id] != nil {
            if client.watchingReads { statistics.heldBack += 1 }
            updateWatch(client)
        }
        flush(client)
    }

    /// The ESPHome release whose API this server follows, in `esphome_version` (Home Assistant
    /// compares it with its own expectations of a proxy).
    public static let esphomeVersion = "2025.8.0"

    var scannerStatus: ScannerStatus {
        ScannerStatus(state: scannerState, mode: scannerMode, configuredMode: configuredScannerMode)
    }

    private var scannerStateMessage: ServerMessage {
        .scannerState(scannerState, mode: scannerMode, configuredMode: configuredScannerMode)
    }

    private func broadcastScannerState() {
        for client in clients.values where client.session.subscribed {
            client.session.send(scannerStateMessage)
            flush(client)
        }
    }

    // MARK: Keyless adoption

    /// NoiseEncryptionSetKeyRequest with provisioning on: stores the key (empty: forgets the
    /// stored one) and answers; the new key is the one of every session from now on, and after
    /// ``keyChangeDisconnectDelay`` every client is asked to disconnect (as ESPHome does), so
    /// they come back with it. Refused: a session whose key is no longer the proxy's (another
    /// client set one since it connected), the all-zero key, anything but 44 characters of
    /// base64, a file that cannot be written.
    private func setKey(_ text: [UInt8], for client: Client) {
        let refusal: String?
        var next: [UInt8]?
        if let keyStore, configuration.provisioning, case .noise(let current) = configuration.encryption {
            let sessionKey: [UInt8]?
            if case .noise(let psk) = client.session.configuration.encryption {
                sessionKey = psk
            } else {
                sessionKey = nil
            }
            if client.session.transport.isPlaintext {
                refusal = "sent in plaintext, where anyone on the network reads it; a key is set over Noise only"
            } else if sessionKey != current {
                refusal = "this session's key is no longer the proxy's (another client set one since it connected)"
            } else if text.isEmpty {
                next = APIKey.zero
                refusal = nil
            } else if let key = APIKey.decode(text), key != APIKey.zero {
                next = key
                refusal = nil
            } else {
                refusal = "not a key (44 characters of base64 of 32 bytes, not all zero)"
            }
            if let next, refusal == nil, next != current {
                do {
                    if next == APIKey.zero { try keyStore.forget() } else { try keyStore.save(next) }
                } catch {
                    statistics.keysRefused += 1
                    log(.error, "API: \(client.peer): cannot keep the encryption key it set: \(error)")
                    client.session.send(.noiseEncryptionSetKeyResponse(success: false))
                    return
                }
            }
        } else {
            refusal = "the key is the config file's"
        }
        guard refusal == nil, let next else {
            statistics.keysRefused += 1
            warn("API: \(client.peer): asked to store a new encryption key: refused (\(refusal ?? ""))")
            client.session.send(.noiseEncryptionSetKeyResponse(success: false))
            return
        }
        statistics.keysSet += 1
        client.session.send(.noiseEncryptionSetKeyResponse(success: true))
        guard case .noise(let current) = configuration.encryption, next != current else { return }
        configuration.encryption = .noise(psk: next)
        log(
            .notice,
            next == APIKey.zero
                ? "API: \(client.peer) cleared the encryption key: unprovisioned (a client may set one)"
                : "API: \(client.peer) set the encryption key (kept in \(keyStore?.path ?? "")); clients reconnect with it"
        )
        keyChanged?(configuration)
        let ids = Array(clients.keys)
        _ = loop.addTimer(after: Self.keyChangeDisconnectDelay) { [weak self] in
            guard let self else { return }
            for id in ids {
                guard let client = clients[id], !client.session.closing else { continue }
                if client.session.phase == .connected { client.session.send(.empty(MessageType.disconnectRequest)) }
                flush(client)
            }
            _ = loop.addTimer(after: Self.keyChangeCloseDelay) { [weak self] in
                guard let self else { return }
                for id in ids {
                    guard let client = clients[id] else { continue }
                    drop(client, "the encryption key changed")
                }
            }
        }
    }

    /// `gattway proxy reset-key` removed the stored key while gattway runs: from the next client
    /// on the proxy is unprovisioned (the file is looked at once per accepted connection, one
    /// stat(2)); clients connected with the old key stay until they leave.
    private func followKeyStore() {
        guard let keyStore, configuration.provisioning, case .noise(let current) = configuration.encryption,
            current != APIKey.zero, !LocalFile.exists(keyStore.path)
        else { return }
        configuration.encryption = .noise(psk: APIKey.zero)
        log(
            .notice,
            "API: \(keyStore.path) was removed (gattway proxy reset-key): unprovisioned (a client may set a key)")
        keyChanged?(configuration)
    }

    // MARK: Advertisements

    /// Queues one advertisement for every subscribed client; loop thread. Sent at the end of this
    /// loop turn (or at once when a batch is full).
    public func forward(_ advertisement: ServerMessage.RawAdvertisement) {
        guard clients.values.contains(where: { $0.session.subscribed }) else { return }
        pending.append(advertisement)
        if pending.count >= Self.batchSize {
            flushAdvertisements()
        } else if !flushScheduled {
            flushScheduled = true
            loop.execute { [self] in flushAdvertisements() }
        }
    }

    private func flushAdvertisements() {
        flushScheduled = false
        guard !pending.isEmpty else { return }
        let message = ServerMessage.rawAdvertisements(pending)
        let count = pending.count
        pending.removeAll(keepingCapacity: true)
        for client in clients.values where client.session.subscribed && !client.session.closing {
            client.session.send(message)
            statistics.advertisementsSent += count
            flush(client)
        }
    }

    // MARK: Sending, timeouts, closing

    /// Moves the transport's bytes to the client's queue and writes what the socket takes.
    func flush(_ client: Client) {
        if !client.session.outgoing.isEmpty {
            client.queue += client.session.outgoing
            client.session.outgoing.removeAll(keepingCapacity: true)
        }
        while client.pendingBytes > 0 {
            let written = client.queue.withUnsafeBytes { buffer in
                send(client.fd, buffer.baseAddress.map { $0 + client.sent }, client.pendingBytes, Int32(MSG_NOSIGNAL))
            }
            if written > 0 {
                client.sent += written
            } else if written < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
                break
            } else {
                drop(client, "write: \(String(cString: strerror(errno)))")
                return
            }
        }
        if client.pendingBytes == 0 {
            client.queue.removeAll(keepingCapacity: client.queue.capacity <= 65_536)
            client.sent = 0
        } else if client.sent >= 65_536 {
            client.queue.removeFirst(client.sent)
            client.sent = 0
        }
        if client.pendingBytes > configuration.maxQueuedBytes {
            statistics.slowClients += 1
            drop(client, "disconnected: \(client.pendingBytes) bytes unsent (a client that does not read)")
            return
        }
        updateWatch(client)
        if client.session.closing, client.pendingBytes == 0 { drop(client, nil) }
    }

    private func drop(_ client: Client, _ reason: String?) {
        guard clients.removeValue(forKey: client.id) != nil else { return }
        releaseConnections(of: client.id)
        if let token = client.token { loop.removeWatch(token) }
        Glibc.close(client.fd)
        statistics.clients = clients.count
        log(.info, "API: \(client.peer) disconnected" + (reason.map { " (\($0))" } ?? ""))
    }

    private func scheduleTick() {
        tickToken = loop.addTimer(after: 1) { [unowned self] in
            guard listenFD >= 0 else { return }
            checkTimeouts()
            scheduleTick()
        }
    }

    private func checkTimeouts() {
        let now = EventLoop.now()
        for client in Array(clients.values) {
            // A session that ended and still has bytes queued had a tick to send them.
            if client.session.closing {
                drop(client, "closed; \(client.pendingBytes) bytes left unsent")
                continue
            }
            // Its requests wait for the Bluetooth side (the server stopped reading): not silent.
            if !client.held.isEmpty { client.lastHeard = now }
            let connected = client.session.phase == .connected
            let limit = connected ? configuration.idleTimeout : configuration.handshakeTimeout
            let since = connected ? client.lastHeard : client.acceptedAt
            let silent = Double(now &- since) / 1e9
            if connected, !client.pinged, silent > limit / 2 {
                // A client that is quiet for half the idle timeout is asked whether it is there,
                // as ESPHome devices do; its PingResponse counts as hearing from it.
                client.pinged = true
                client.session.send(.empty(MessageType.pingRequest))
                flush(client)
                continue
            }
            if silent > limit {
                statistics.idleTimeouts += 1
                drop(
                    client,
                    connected ? "idle for \(Int(limit)) s" : "no handshake within \(Int(limit)) s")
            }
        }
    }

    /// One API connection.
    final class Client {
        let id: Int
        let fd: Int32
        let peer: String
        let acceptedAt: UInt64
        var lastHeard: UInt64
        var token: EventLoop.Token?
        var session: APISession
        var queue: [UInt8] = []
        var sent = 0
        var watchingWrites = false
        var watchingReads = true
        /// Requests received but not served yet, in order: the first waits for room on its
        /// connection (``APIServer/maxInFlight``); while any wait the socket is not read.
        var held: [APISession.ProxyRequest] = []
        /// ``APIServer/serveHeld(_:)`` is running (it is not entered again from a completion).
        var servingHeld = false
        /// A PingRequest was sent after half the idle timeout of silence (cleared by any byte).
        var pinged = false
        /// The client subscribed to BluetoothConnectionsFreeResponse.
        var connectionsFreeSubscribed = false
        /// What its HelloRequest said: its name and version, and the API version it speaks.
        var hello: (info: String, api: String)?
        var pendingBytes: Int { queue.count - sent }

        init(id: Int, fd: Int32, peer: String, now: UInt64, session: APISession) {
            self.id = id
            self.fd = fd
            self.peer = peer
            self.acceptedAt = now
            self.lastHeard = now
            self.session = session
        }
    }
}
