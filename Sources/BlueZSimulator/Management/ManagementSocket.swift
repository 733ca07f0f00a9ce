import EventLoop
import LocalSystem

#if canImport(Glibc)
    import Glibc
#endif

/// The listening Unix `SOCK_SEQPACKET` socket through which the simulator serves the kernel's
/// Bluetooth management protocol (docs/simulator.md, "Management socket"): one management packet
/// per datagram in each direction, as the kernel's `HCI_CHANNEL_CONTROL` socket delivers them.
///
/// Nonblocking, on the event loop: the listener and each client are watches, no thread, no task.
/// A datagram a client cannot take at once waits in that client's queue (at most
/// ``maximumQueued``, sent when the socket is writable again); a client whose queue is full does
/// not read and is dropped, so memory never grows with it. Loop thread only; owned by the
/// ``BlueZSimulator`` actor (whose executor is the loop) and used only in its isolation.
final class ManagementSocket {
    /// Why a client went.
    enum DropReason: Equatable {
        case closed
        case malformed(String)
        case notReading
        case failed(String)

        var text: String {
            switch self {
            case .closed: "closed by the client"
            case .malformed(let why): "malformed packet (\(why))"
            case .notReading: "does not read (\(ManagementSocket.maximumQueued) packets waiting)"
            case .failed(let why): why
            }
        }
    }

    /// Clients connected at once at most; more are refused (closed at once).
    static let maximumClients = 32
    /// Packets waiting for one client at most before it is dropped.
    static let maximumQueued = 1024
    /// The largest datagram taken from a client; a larger one is malformed.
    static let maximumDatagram = 4096

    let path: String
    private let loop: EventLoop
    private var listenFD: Int32 = -1
    private var listenToken: EventLoop.Token?
    private var clients: [Int: Client] = [:]
    private var nextID = 0
    private var readBuffer = [UInt8](repeating: 0, count: ManagementSocket.maximumDatagram + 1)
    /// A datagram from a client (its id, the bytes).
    private let receive: (Int, [UInt8]) -> Void
    private let log: (String) -> Void
    private(set) var statistics = ManagementStatistics()

    private final class Client {
        let id: Int
        let fd: Int32
        var token: EventLoop.Token?
        var queue: [[UInt8]] = []
        var queueHead = 0
        init(id: Int, fd: Int32) {
            self.id = id
            self.fd = fd
        }
        var waiting: Int { queue.count - queueHead }
    }

    /// Binds `path` (a stale socket there is replaced; anything else there is an error) and listens.
    /// Loop thread.
    init(
        path: String, loop: EventLoop, log: @escaping (String) -> Void,
        receive: @escaping (_ client: Int, _ packet: [UInt8]) -> Void
    ) throws(ManagementSocketError) {
        loop.preconditionInLoop()
        self.path = path
        self.loop = loop
        self.log = log
        self.receive = receive
        guard !path.hasPrefix("@"), let address = UnixSocketAddress(path) else {
            throw ManagementSocketError(call: "bind \(path)", code: ENAMETOOLONG)
        }
        var status = stat()
        if lstat(path, &status) == 0 {
            guard status.st_mode & S_IFMT == S_IFSOCK else {
                throw ManagementSocketError(call: "bind \(path) (not a socket there)", code: EEXIST)
            }
            unlink(path)
        }
        let type = Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        let fd = socket(AF_UNIX, type, 0)
        guard fd >= 0 else { throw ManagementSocketError(call: "socket", code: errno) }
        let bound = address.withSockaddr { bind(fd, $0, $1) }
        guard bound == 0 else {
            let code = errno
            Glibc.close(fd)
            throw ManagementSocketError(call: "bind \(path)", code: code)
        }
        guard listen(fd, 16) == 0 else {
            let code = errno
            Glibc.close(fd)
            unlink(path)
            throw ManagementSocketError(call: "listen \(path)", code: code)
        }
        listenFD = fd
        listenToken = loop.addWatch(fd: fd, events: .readable) { [unowned self] _ in self.acceptClients() }
    }

    /// The clients connected now.
    var clientCount: Int { clients.count }

    /// Closes every client and the listener and removes the socket file.
    func close() {
        for id in Array(clients.keys) { disconnect(id) }
        if let listenToken { loop.removeWatch(listenToken) }
        listenToken = nil
        if listenFD >= 0 {
            Glibc.close(listenFD)
            unlink(path)
        }
        listenFD = -1
    }

    // MARK: Sending

    /// Sends `packet` to every client (the kernel broadcasts events to every control socket).
    func broadcast(_ packet: [UInt8], except skipped: Int? = nil) {
        for id in Array(clients.keys).sorted() where id != skipped { send(packet, to: id) }
    }

    /// Sends `packet` to one client: at once, or after what waits for it; a client whose queue
    /// is full is dropped.
    func send(_ packet: [UInt8], to id: Int) {
        guard let client = clients[id] else { return }
        if client.waiting == 0 {
            switch write(packet, on: client.fd) {
            case .sent:
                statistics.packetsSent += 1
                return
            case .failed(let why):
                return drop(id, .failed(why))
            case .full:
                break
            }
        }
        guard client.waiting < Self.maximumQueued else { return drop(id, .notReading) }
        client.queue.append(packet)
        if let token = client.token { loop.updateWatch(token, events: [.readable, .writable]) }
    }

    private enum WriteOutcome { case sent, full, failed(String) }

    private func write(_ packet: [UInt8], on fd: Int32) -> WriteOutcome {
        let sent = packet.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        if sent == packet.count { return .sent }
        if sent < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ENOBUFS { return .full }
        return .failed("send: \(String(cString: strerror(errno)))")
    }

    /// Sends what waits for a client while its socket takes it.
    private func flush(_ client: Client) {
        while client.queueHead < client.queue.count {
            switch write(client.queue[client.queueHead], on: client.fd) {
            case .sent:
                statistics.packetsSent += 1
                client.queueHead += 1
            case .full:
                return
            case .failed(let why):
                return drop(client.id, .failed(why))
            }
        }
        client.queue.removeAll(keepingCapacity: false)
        client.queueHead = 0
        if let token = client.token { loop.updateWatch(token, events: .readable) }
    }

    // MARK: Clients

    private func acceptClients() {
        while listenFD >= 0 {
            let fd = accept(listenFD, nil, nil)
            guard fd >= 0 else { return }  // EAGAIN: all taken (or out of descriptors: tried again next turn)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            guard clients.count < Self.maximumClients else {
                statistics.refused += 1
                log("simulator: management socket: refused a client (\(Self.maximumClients) connected)")
                Glibc.close(fd)
                continue
            }
            let id = nextID
            nextID += 1
            let client = Client(id: id, fd: fd)
            client.token = loop.addWatch(fd: fd, events: .readable) { [unowned self] events in
                self.handle(id, events)
            }
            clients[id] = client
            statistics.accepted += 1
            log("simulator: management socket: client \(id) connected")
        }
    }

    private func handle(_ id: Int, _ events: EventLoop.IOEvents) {
        guard let client = clients[id] else { return }
        if events.contains(.writable) { flush(client) }
        guard clients[id] != nil else { return }
        if events.contains(.readable) || events.contains(.hangup) || events.contains(.error) { read(client) }
    }

    private func read(_ client: Client) {
        // A bounded number of datagrams per readiness keeps one busy client from starving the loop.
        for _ in 0..<64 {
            let count = readBuffer.withUnsafeMutableBytes { recv(client.fd, $0.baseAddress, $0.count, 0) }
            if count == 0 { return drop(client.id, .closed) }
            if count < 0 {
                if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { return }
                return drop(client.id, .failed("recv: \(String(cString: strerror(errno)))"))
            }
            guard count <= Self.maximumDatagram else {
                return drop(client.id, .malformed("a datagram over \(Self.maximumDatagram) bytes"))
            }
            statistics.packetsReceived += 1
            receive(client.id, Array(readBuffer[0..<count]))
            guard clients[client.id] != nil else { return }
        }
    }

    /// Drops a client: counted by its reason and logged.
    func drop(_ id: Int, _ reason: DropReason) {
        guard clients[id] != nil else { return }
        switch reason {
        case .closed: break
        case .malformed: statistics.malformed += 1
        case .notReading: statistics.notReading += 1
        case .failed: statistics.failed += 1
        }
        log("simulator: management socket: client \(id) dropped: \(reason.text)")
        disconnect(id)
    }

    private func disconnect(_ id: Int) {
        guard let client = clients.removeValue(forKey: id) else { return }
        if let token = client.token { loop.removeWatch(token) }
        Glibc.close(client.fd)
    }
}

/// What the management socket did so far.
public struct ManagementStatistics: Sendable, Equatable {
    public var accepted = 0
    /// Clients refused because ``ManagementSocket/maximumClients`` were connected.
    public var refused = 0
    /// Clients dropped for a malformed packet.
    public var malformed = 0
    /// Clients dropped because they did not read.
    public var notReading = 0
    /// Clients dropped because their socket failed.
    public var failed = 0
    public var packetsReceived = 0
    public var packetsSent = 0
}

/// The management socket could not be set up: the failing call and its errno.
public struct ManagementSocketError: Error, CustomStringConvertible, Sendable {
    public var call: String
    public var code: Int32

    public var description: String { "\(call): \(String(cString: strerror(code)))" }
}
