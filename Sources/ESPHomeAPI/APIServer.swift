import Bluetooth
import EventLoop

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
/// Advertisements given to ``forward(_:)`` are batched (at most 16 per message) and sent at the
/// end of the loop turn they arrived in, to every client subscribed to them.
///
/// Loop-thread only, like every other user of the loop: the invariant behind `@unchecked Sendable`.
public final class APIServer: @unchecked Sendable {
    public let configuration: APIServerConfiguration
    private let loop: EventLoop
    private let log: @Sendable (APIServerLogLevel, String) -> Void
    private var listenFD: Int32 = -1
    private var listenToken: EventLoop.Token?
    private var tickToken: EventLoop.Token?
    private var clients: [Int: Client] = [:]
    private var nextClientID = 0
    private var pending: [ServerMessage.RawAdvertisement] = []
    private var flushScheduled = false
    private var readBuffer = [UInt8](repeating: 0, count: 4096)

    /// The counters (loop thread).
    public private(set) var statistics = APIServerStatistics()
    /// The port bound by ``start()`` (the configured one, or the one chosen for port 0).
    public private(set) var port: UInt16 = 0
    /// What BluetoothScannerStateResponse reports; changes are sent to subscribed clients.
    public var scannerState: BluetoothScannerState = .running {
        didSet { if scannerState != oldValue { broadcastScannerState() } }
    }
    /// BlueZ discovery scans actively (it asks for scan responses).
    public var scannerMode: BluetoothScannerMode = .active

    /// The largest number of advertisements in one BluetoothLERawAdvertisementsResponse.
    public static let batchSize = 16
    /// The API version gattway speaks (HelloResponse).
    public static let apiVersion = (major: UInt32(1), minor: UInt32(14))

    public init(
        configuration: APIServerConfiguration, loop: EventLoop,
        log: @escaping @Sendable (APIServerLogLevel, String) -> Void
    ) {
        self.configuration = configuration
        self.loop = loop
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
            if client.phase == .connected { client.transport.send(.empty(MessageType.disconnectRequest)) }
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
            guard fd >= 0 else { return }  // EAGAIN: all taken; other errors: the next readiness retries
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
            inet_ntop(AF_INET, &address.sin_addr, &text, socklen_t(INET_ADDRSTRLEN))
            let peer = "\(String(cString: text)):\(UInt16(bigEndian: address.sin_port))"
            guard clients.count < configuration.maxClients else {
                statistics.refusedFull += 1
                log(.warning, "API: refused \(peer): \(configuration.maxClients) clients connected (max_clients)")
                Glibc.close(fd)
                continue
            }
            var one: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            let id = nextClientID
            nextClientID += 1
            let client = Client(
                id: id, fd: fd, peer: peer, now: EventLoop.now(),
                transport: APITransport(
                    encryption: configuration.encryption, name: configuration.name, mac: configuration.helloMac,
                    maxFrame: configuration.maxFrame))
            if client.transport.isReady { client.phase = Client.Phase.awaitingHello }
            client.token = loop.addWatch(fd: fd, events: .readable) { [unowned self] events in
                self.handleEvents(id, events)
            }
            clients[id] = client
            statistics.accepted += 1
            statistics.clients = clients.count
            log(.debug, "API: \(peer) connected")
        }
    }

    // MARK: Per client

    private func handleEvents(_ id: Int, _ events: EventLoop.IOEvents) {
        guard let client = clients[id] else { return }
        if events.contains(.writable) { flush(client) }
        guard clients[id] != nil else { return }
        if events.contains(.readable) || events.contains(.hangup) || events.contains(.error) { read(client) }
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
            receive(client, readBuffer[0..<count])
            guard clients[client.id] != nil, !client.closing else { return }
        }
    }

    /// Feeds a client's bytes through its transport and session; public to the package for the
    /// fuzz target and tests, which drive a client without a socket.
    private func receive(_ client: Client, _ bytes: ArraySlice<UInt8>) {
        let messages: [(type: UInt16, payload: [UInt8])]
        do {
            messages = try client.transport.receive(bytes)
        } catch {
            switch error {
            case .handshakeRefused:
                statistics.handshakeFailures += 1
                log(.warning, "API: \(client.peer): Noise handshake refused (wrong encryption key?)")
            case .frame(.tooLarge(let size)):
                statistics.oversizeFrames += 1
                log(.warning, "API: \(client.peer): frame of \(size) bytes over the limit")
            default:
                statistics.protocolErrors += 1
                log(.warning, "API: \(client.peer): \(error)")
            }
            client.closing = true
            flush(client)
            drop(client, nil)
            return
        }
        if client.phase == .handshake, client.transport.isReady { client.phase = .awaitingHello }
        for (type, payload) in messages {
            let message: ClientMessage
            do {
                message = try ClientMessage.decode(type: type, payload: payload[...])
            } catch {
                statistics.protocolErrors += 1
                log(.warning, "API: \(client.peer): malformed message \(type): \(error)")
                client.closing = true
                break
            }
            handle(client, message)
            if client.closing { break }
        }
        flush(client)
        if client.closing, client.pendingBytes == 0 { drop(client, nil) }
    }

    private func handle(_ client: Client, _ message: ClientMessage) {
        if client.phase != .connected {
            guard case .hello(let info, let major, let minor) = message else {
                statistics.protocolErrors += 1
                log(.warning, "API: \(client.peer): \(message) before HelloRequest")
                client.closing = true
                return
            }
            client.phase = .connected
            client.clientInfo = info
            client.transport.send(
                .helloResponse(
                    major: Self.apiVersion.major, minor: Self.apiVersion.minor,
                    serverInfo: "gattway \(configuration.version)", name: configuration.name))
            log(.info, "API: \(client.peer) (\(info), API \(major).\(minor)) connected")
            return
        }
        switch message {
        case .hello, .authentication, .pingResponse, .getTimeResponse, .subscription, .unknown:
            break
        case .disconnectRequest:
            client.transport.send(.empty(MessageType.disconnectResponse))
            client.closing = true
        case .disconnectResponse:
            client.closing = true
        case .pingRequest:
            client.transport.send(.empty(MessageType.pingResponse))
        case .deviceInfoRequest:
            client.transport.send(.deviceInfoResponse(deviceInfo))
        case .deviceCapabilitiesRequest:
            client.transport.send(
                .deviceCapabilitiesResponse(
                    features: configuration.features, bluetoothMacAddress: configuration.bluetoothMacAddress))
        case .listEntitiesRequest:
            client.transport.send(.empty(MessageType.listEntitiesDoneResponse))
        case .subscribeBluetoothLEAdvertisements(let flags):
            client.subscribed = true
            if flags & BluetoothSubscriptionFlag.rawAdvertisements == 0 {
                log(.debug, "API: \(client.peer): asked for parsed advertisements; sending raw ones (as ESPHome does)")
            }
            client.transport.send(scannerStateMessage)
        case .unsubscribeBluetoothLEAdvertisements:
            client.subscribed = false
        case .subscribeBluetoothConnectionsFree:
            // GATT connections through the proxy are not served yet: no slot is offered.
            client.transport.send(.connectionsFree(free: 0, limit: 0, allocated: []))
        case .bluetoothScannerSetMode:
            // BlueZ's discovery mode is not switched per client; report what it is.
            client.transport.send(scannerStateMessage)
        case .bluetoothDeviceRequest(let address, let requestType, _):
            refuseDeviceRequest(client, address: address, requestType: requestType)
        }
    }

    /// Device requests are answered at once with a failure until GATT proxying exists.
    private func refuseDeviceRequest(_ client: Client, address: UInt64, requestType: UInt32) {
        let notSupported: Int32 = 6  // ESP_GATT_REQ_NOT_SUPPORTED, as ESPHome devices report errors
        var writer = ProtobufWriter()
        writer.varint(1, address)
        switch requestType {
        case 2:  // pair
            writer.int32(3, notSupported)
            client.transport.send(ServerMessage(type: 85, payload: writer.bytes))
        case 3:  // unpair
            writer.int32(3, notSupported)
            client.transport.send(ServerMessage(type: 86, payload: writer.bytes))
        case 6:  // clear cache
            writer.int32(3, notSupported)
            client.transport.send(ServerMessage(type: 88, payload: writer.bytes))
        case 1:  // disconnect: nothing is connected
            client.transport.send(.deviceConnection(address: address, connected: false, mtu: 0, error: 0))
        default:  // connect (with or without cache)
            client.transport.send(.deviceConnection(address: address, connected: false, mtu: 0, error: notSupported))
        }
    }

    private var deviceInfo: ServerMessage.DeviceInfo {
        ServerMessage.DeviceInfo(
            name: configuration.name, friendlyName: configuration.friendlyName, macAddress: configuration.macAddress,
            bluetoothMacAddress: configuration.bluetoothMacAddress, esphomeVersion: Self.esphomeVersion,
            compilationTime: "", model: "gattway", manufacturer: "gattway", projectName: "gattway.gattway",
            projectVersion: configuration.version, bluetoothProxyFeatures: configuration.features,
            apiEncryptionSupported: { if case .noise = configuration.encryption { true } else { false } }())
    }

    /// The ESPHome release whose API this server follows, in `esphome_version` (Home Assistant
    /// compares it with its own expectations of a proxy).
    public static let esphomeVersion = "2025.8.0"

    private var scannerStateMessage: ServerMessage {
        .scannerState(scannerState, mode: scannerMode, configuredMode: scannerMode)
    }

    private func broadcastScannerState() {
        for client in clients.values where client.subscribed {
            client.transport.send(scannerStateMessage)
            flush(client)
        }
    }

    // MARK: Advertisements

    /// Queues one advertisement for every subscribed client; loop thread. Sent at the end of this
    /// loop turn (or at once when a batch is full).
    public func forward(_ advertisement: ServerMessage.RawAdvertisement) {
        guard clients.values.contains(where: { $0.subscribed }) else { return }
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
        for client in clients.values where client.subscribed && !client.closing {
            client.transport.send(message)
            statistics.advertisementsSent += count
            flush(client)
        }
    }

    // MARK: Sending, timeouts, closing

    /// Moves the transport's bytes to the client's queue and writes what the socket takes.
    private func flush(_ client: Client) {
        if !client.transport.outgoing.isEmpty {
            client.queue += client.transport.outgoing
            client.transport.outgoing.removeAll(keepingCapacity: true)
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
        let wantsWrite = client.pendingBytes > 0
        if wantsWrite != client.watchingWrites, let token = client.token {
            client.watchingWrites = wantsWrite
            loop.updateWatch(token, events: wantsWrite ? [.readable, .writable] : .readable)
        }
        if client.closing, client.pendingBytes == 0 { drop(client, nil) }
    }

    private func drop(_ client: Client, _ reason: String?) {
        guard clients.removeValue(forKey: client.id) != nil else { return }
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
            let limit = client.phase == .connected ? configuration.idleTimeout : configuration.handshakeTimeout
            let since = client.phase == .connected ? client.lastHeard : client.acceptedAt
            if Double(now &- since) / 1e9 > limit {
                statistics.idleTimeouts += 1
                drop(
                    client,
                    client.phase == .connected ? "idle for \(Int(limit)) s" : "no handshake within \(Int(limit)) s")
            }
        }
    }

    /// One API connection.
    final class Client {
        enum Phase { case handshake, awaitingHello, connected }
        let id: Int
        let fd: Int32
        let peer: String
        let acceptedAt: UInt64
        var lastHeard: UInt64
        var token: EventLoop.Token?
        var transport: APITransport
        var phase = Phase.handshake
        var clientInfo = ""
        var subscribed = false
        var closing = false
        var queue: [UInt8] = []
        var sent = 0
        var watchingWrites = false
        var pendingBytes: Int { queue.count - sent }

        init(id: Int, fd: Int32, peer: String, now: UInt64, transport: APITransport) {
            self.id = id
            self.fd = fd
            self.peer = peer
            self.acceptedAt = now
            self.lastHeard = now
            self.transport = transport
        }
    }
}
