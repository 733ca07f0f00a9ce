internal import CMicroHTTPD
import EventLoop

#if canImport(Glibc)
    import Glibc
#endif

/// The web server's settings: where it listens, its limits and TLS (docs/web.md, "Limits").
public struct HTTPServerConfiguration: Sendable {
    /// An IPv4 address (`web.listen`).
    public var host = "127.0.0.1"
    /// 0: any free port (tests; ``HTTPServer/port`` says which).
    public var port: UInt16 = 8080
    /// Connections at once; more are closed at once by libmicrohttpd.
    public var maxConnections = 32
    /// Bytes per connection for its request line, header fields and buffers; a request whose
    /// header does not fit is answered 431 (or 414 for a long request line).
    public var connectionMemoryLimit = 32 * 1024
    /// Seconds a connection may be idle (a request that trickles in, a response not read).
    public var timeoutSeconds = 30
    /// Each connection's socket send buffer, in bytes (the kernel doubles it; 0: the kernel's
    /// default, which grows to megabytes): what a client that does not read holds in our kernel.
    public var socketSendBuffer = 16 * 1024
    /// The largest request body read; a larger one is answered 413.
    public var maxBodyBytes = 16 * 1024
    /// The certificate chain and private key as PEM text: HTTPS.
    public var tls: (certificate: String, key: String)?

    public init() {}
}

/// Why the server could not start.
public struct HTTPServerError: Error, CustomStringConvertible {
    public let description: String

    public init(description: String) { self.description = description }
}

/// What the server's user decides.
public struct HTTPHandlers {
    /// Sees a request before its body is read (`body` empty): a response refuses it at once (401).
    public var screen: (HTTPRequest) -> HTTPResponse?
    /// Answers a complete request.
    public var respond: (HTTPRequest) -> HTTPReply
    /// Told each request the server refused itself.
    public var refused: (HTTPServer.Refusal) -> Void
    /// Told when the server, started, cannot serve after all: libmicrohttpd could not be loaded
    /// or started at the first connection (``HTTPServer``); the listening socket is closed.
    public var failed: (String) -> Void

    public init(
        screen: @escaping (HTTPRequest) -> HTTPResponse?, respond: @escaping (HTTPRequest) -> HTTPReply,
        refused: @escaping (HTTPServer.Refusal) -> Void, failed: @escaping (String) -> Void = { _ in }
    ) {
        self.screen = screen
        self.respond = respond
        self.refused = refused
        self.failed = failed
    }
}

/// An HTTP/1.1 server (libmicrohttpd) inside the process's event loop: libmicrohttpd runs in its
/// external-poll mode over epoll, so its one epoll descriptor is a watch of the loop and its
/// timeouts one timer; every callback — and so every handler — runs on the loop thread, with no
/// thread of the library's own (docs/web.md, "Why libmicrohttpd"). Server-Sent Events are
/// responses whose connection is suspended while nothing waits and resumed when an event is
/// pushed. Loop-confined: start, stop and everything else on the loop thread.
///
/// The server binds and listens itself at ``start(_:loop:handlers:)`` (so a port in use is an
/// error then), but loads libmicrohttpd — and with it GnuTLS — only when the first client
/// connects (at the start with TLS configured): until someone visits, the process carries
/// none of it (docs/web.md, "Memory").
public final class HTTPServer {
    /// A request the server refused before a handler saw it.
    public enum Refusal: Sendable {
        /// A body beyond ``HTTPServerConfiguration/maxBodyBytes`` (413, or the connection closed).
        case tooLarge
        /// A request target that is not a path with a well-formed query string (400).
        case badRequest
        /// A connection beyond ``HTTPServerConfiguration/maxConnections``, closed at once.
        case connectionLimit
    }

    public let configuration: HTTPServerConfiguration
    /// The port it listens on.
    public private(set) var port: UInt16 = 0
    private let loop: EventLoop
    private let handlers: HTTPHandlers
    private var daemon: OpaquePointer?
    /// The listening socket, until libmicrohttpd takes it over (then it closes it at the stop).
    private var listener: Int32 = -1
    private var watch: EventLoop.Token?
    private var timer: EventLoop.Token?
    private var streams: [ObjectIdentifier: StreamBinding] = [:]
    /// Requests whose answer comes later (``DeferredReply``), their connections suspended.
    private var waiting: [ObjectIdentifier: PendingReply] = [:]
    /// What the connection-limit check shares with the C callbacks (connections open, refused).
    private let limit = UnsafeMutablePointer<gattway_mhd_limit>.allocate(capacity: 1)
    /// Connections refused at the limit so far, as last told to ``HTTPHandlers/refused``.
    private var refusedConnections: UInt = 0
    /// PEM text kept alive while the daemon uses it.
    private var certificate: [CChar] = []
    private var key: [CChar] = []

    /// Event streams open now.
    public var eventStreamCount: Int { streams.count }

    /// Whether libmicrohttpd serves now (loaded and started: a client came, or TLS is on).
    public var isServing: Bool { daemon != nil }

    /// Loads libmicrohttpd now: nil when it is loaded and complete, else why not (`gattway
    /// doctor` asks: `ldd` does not list a library loaded with `dlopen`).
    public static func loadLibrary() -> String? {
        gattway_mhd_load().map { String(cString: $0) }
    }

    /// Whether libmicrohttpd is in the process (this server or another loaded it).
    public static var libraryLoaded: Bool { gattway_mhd_is_loaded() != 0 }

    /// Requests waiting for a deferred answer now.
    public var waitingCount: Int { waiting.count }

    private init(configuration: HTTPServerConfiguration, loop: EventLoop, handlers: HTTPHandlers) {
        self.configuration = configuration
        self.loop = loop
        self.handlers = handlers
        limit.initialize(
            to: gattway_mhd_limit(
                send_buffer: Int32(clamping: configuration.socketSendBuffer), open: 0,
                limit: UInt32(clamping: configuration.maxConnections), refused: 0))
    }

    deinit {
        limit.deinitialize(count: 1)
        limit.deallocate()
    }

    /// Whether this libmicrohttpd was built with HTTPS (Debian's is); loads the library to ask.
    public static var supportsTLS: Bool {
        gattway_mhd_load() == nil && gattway_MHD_is_feature_supported(MHD_FEATURE(rawValue: 2)!) == .YES
    }

    /// Binds and starts serving. Loop thread only.
    public static func start(_ configuration: HTTPServerConfiguration, loop: EventLoop, handlers: HTTPHandlers)
        throws(HTTPServerError) -> HTTPServer
    {
        loop.preconditionInLoop()
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = configuration.port.bigEndian
        guard inet_pton(AF_INET, configuration.host, &address.sin_addr) == 1 else {
            throw HTTPServerError(description: "\(configuration.host) is not an IPv4 address")
        }
        let server = HTTPServer(configuration: configuration, loop: loop, handlers: handlers)
        if let tls = configuration.tls {
            server.certificate = Array(tls.certificate.utf8CString)
            server.key = Array(tls.key.utf8CString)
        }
        server.listener = try listen(&address, configuration)
        server.port = UInt16(bigEndian: address.sin_port)
        if configuration.tls != nil {
            // The certificate is checked now, not at the first visit.
            do throws(HTTPServerError) {
                try server.startDaemon()
            } catch {
                close(server.listener)
                throw error
            }
        } else {
            server.watch = loop.addWatch(fd: server.listener, events: .readable) { [unowned server] _ in
                server.firstClient()
            }
        }
        return server
    }

    /// A socket bound to `address` and listening (non-blocking, close-on-exec), its port noted
    /// in `address`.
    private static func listen(_ address: inout sockaddr_in, _ configuration: HTTPServerConfiguration)
        throws(HTTPServerError) -> Int32
    {
        let fd = socket(
            AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else {
            throw HTTPServerError(description: "cannot make a socket: \(String(cString: strerror(errno)))")
        }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        guard bound == 0, Glibc.listen(fd, 64) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw HTTPServerError(
                description: "cannot listen on \(configuration.host):\(configuration.port): \(reason)")
        }
        var named = sockaddr_in()
        var namedLength = length
        _ = withUnsafeMutablePointer(to: &named) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &namedLength) }
        }
        address.sin_port = named.sin_port
        return fd
    }

    /// The first client knocks: libmicrohttpd is loaded and takes over the listening socket
    /// (the client waiting in its backlog is accepted by the first run).
    private func firstClient() {
        if let watch { loop.removeWatch(watch) }
        watch = nil
        do throws(HTTPServerError) {
            try startDaemon()
        } catch {
            close(listener)
            listener = -1
            handlers.failed(error.description)
        }
    }

    /// Loads libmicrohttpd, starts its daemon on the listening socket and serves.
    private func startDaemon() throws(HTTPServerError) {
        if let problem = gattway_mhd_load() {
            throw HTTPServerError(description: "cannot load libmicrohttpd: \(String(cString: problem))")
        }
        if configuration.tls != nil, !Self.supportsTLS {
            throw HTTPServerError(description: "this libmicrohttpd was built without HTTPS")
        }
        let context = Unmanaged.passUnretained(self).toOpaque()
        let configuration = self.configuration
        errno = 0
        let daemon = certificate.withUnsafeBufferPointer { certificate in
            key.withUnsafeBufferPointer { key in
                gattway_mhd_start(
                    listener, limit, configuration.connectionMemoryLimit,
                    UInt32(clamping: configuration.timeoutSeconds),
                    configuration.tls == nil ? nil : certificate.baseAddress,
                    configuration.tls == nil ? nil : key.baseAddress, accessHandler, context, requestCompleted, uriLog)
            }
        }
        guard let daemon else {
            let reason = errno != 0 ? String(cString: strerror(errno)) : "libmicrohttpd refused the settings"
            throw HTTPServerError(
                description: "cannot serve on \(configuration.host):\(port): \(reason)"
                    + (configuration.tls != nil ? " (or the TLS certificate and key are not valid PEM)" : ""))
        }
        self.daemon = daemon
        listener = -1  // libmicrohttpd's now
        let epoll = gattway_mhd_epoll_fd(daemon)
        guard epoll >= 0 else {
            gattway_MHD_stop_daemon(daemon)
            self.daemon = nil
            throw HTTPServerError(description: "libmicrohttpd has no epoll descriptor")
        }
        watch = loop.addWatch(fd: epoll, events: .readable) { [unowned self] _ in serve() }
        serve()
    }

    /// Closes every connection (event streams end) and the listening socket. Loop thread only.
    public func stop() {
        loop.preconditionInLoop()
        guard let daemon else {
            // Not serving yet (nobody came): only the listening socket to close.
            if let watch { loop.removeWatch(watch) }
            watch = nil
            if listener >= 0 { close(listener) }
            listener = -1
            return
        }
        // A suspended connection must be resumed before the daemon stops (libmicrohttpd's rule);
        // an ended stream's reader closes its connection.
        for binding in streams.values {
            binding.stream.finish()
            binding.resume()
        }
        for pending in Array(waiting.values) { pending.reply.abandon(.text(503, "the server is stopping")) }
        gattway_MHD_run(daemon)
        if let watch { loop.removeWatch(watch) }
        if let timer { loop.cancelTimer(timer) }
        watch = nil
        timer = nil
        gattway_MHD_stop_daemon(daemon)
        self.daemon = nil
        streams = [:]
    }

    /// Lets libmicrohttpd do what is ready, then arms the timer for its next timeout.
    ///
    /// A run that closed a connection is followed by two more: libmicrohttpd frees the slot in
    /// the next run and only in the one after puts the listening socket back into its epoll set
    /// (taken out at the connection limit), with no descriptor to wake us in between.
    func serve() {
        guard let daemon else { return }
        let before = gattway_mhd_connections(daemon)
        gattway_MHD_run(daemon)
        if gattway_mhd_connections(daemon) < before {
            gattway_MHD_run(daemon)
            gattway_MHD_run(daemon)
        }
        // Connections the accept policy closed at the limit since the last run.
        while refusedConnections < limit.pointee.refused {
            refusedConnections += 1
            handlers.refused(.connectionLimit)
        }
        if let timer { loop.cancelTimer(timer) }
        timer = nil
        var milliseconds: CUnsignedLongLong = 0
        if gattway_MHD_get_timeout(daemon, &milliseconds) == .YES {
            timer = loop.addTimer(after: Double(min(milliseconds, 60_000)) / 1000) { [unowned self] in
                timer = nil
                serve()
            }
        }
    }

    // MARK: Requests

    /// One request's state between libmicrohttpd's calls of the access handler.
    final class RequestContext {
        let target: String
        var head: HTTPRequest?
        var body: [UInt8] = []
        var answered = false
        /// The answer a handler gives later; the connection is suspended until then.
        var deferred: DeferredReply?

        init(target: String) { self.target = target }
    }

    fileprivate func handle(
        _ connection: OpaquePointer, method: String, upload: UnsafePointer<CChar>?, size: UnsafeMutablePointer<Int>,
        context: RequestContext
    ) -> Bool {
        guard var head = context.head else {
            // The first call: the header is in, the body (if any) not yet.
            guard let target = RequestTarget(context.target) else {
                handlers.refused(.badRequest)
                context.answered = true
                return queue(connection, .text(400, "bad request target"))
            }
            let head = HTTPRequest(
                method: method, path: target.path, query: target.query, headers: Self.headers(connection))
            context.head = head
            if let refusal = handlers.screen(head) {
                context.answered = true
                return queue(connection, refusal)
            }
            if let length = head.header("content-length"), (Int(length) ?? Int.max) > configuration.maxBodyBytes {
                handlers.refused(.tooLarge)
                context.answered = true
                return queue(
                    connection, .text(413, "request body too large (at most \(configuration.maxBodyBytes) bytes)"))
            }
            return true
        }
        if context.answered {
            // A deferred answer given: the resumed connection is asked again, with no upload.
            if size.pointee == 0, let deferred = context.deferred, let response = deferred.response {
                context.deferred = nil
                return queue(connection, response)
            }
            size.pointee = 0
            return true
        }
        if size.pointee > 0 {
            // A body without a length (chunked) that outgrows the limit: the connection is closed.
            guard let upload, context.body.count + size.pointee <= configuration.maxBodyBytes else {
                handlers.refused(.tooLarge)
                return false
            }
            upload.withMemoryRebound(to: UInt8.self, capacity: size.pointee) {
                context.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: size.pointee))
            }
            size.pointee = 0
            return true
        }
        head.body = context.body
        context.body = []
        context.answered = true
        switch handlers.respond(head) {
        case .response(let response): return queue(connection, response)
        case .events(let stream): return queue(connection, stream)
        case .deferred(let reply):
            if let response = reply.response { return queue(connection, response) }
            context.deferred = reply
            let pending = PendingReply(server: self, connection: connection, reply: reply)
            waiting[ObjectIdentifier(pending)] = pending
            reply.link = pending
            pending.timer = loop.addTimer(after: reply.timeout) { [weak reply] in
                reply?.abandon(.text(504, "no answer within \(Int(reply?.timeout ?? 0)) s"))
            }
            gattway_MHD_suspend_connection(connection)
            return true
        }
    }

    fileprivate func resume(_ pending: PendingReply) {
        waiting[ObjectIdentifier(pending)] = nil
        if let timer = pending.timer { loop.cancelTimer(timer) }
        pending.timer = nil
        gattway_MHD_resume_connection(pending.connection)
        serveSoon()
    }

    /// Headers every response has: no caching of what may be private, no content sniffing, no
    /// framing by other sites.
    static let standardHeaders: [(name: String, value: String)] = [
        ("Cache-Control", "no-store"), ("X-Content-Type-Options", "nosniff"), ("X-Frame-Options", "DENY"),
        ("Referrer-Policy", "no-referrer"),
    ]

    private func queue(_ connection: OpaquePointer, _ response: HTTPResponse) -> Bool {
        let made = response.body.withUnsafeBytes { body in
            gattway_MHD_create_response_from_buffer(
                body.count, UnsafeMutableRawPointer(mutating: body.baseAddress), .RESPMEM_MUST_COPY)
        }
        guard let made else { return false }
        defer { gattway_MHD_destroy_response(made) }
        Self.addHeaders(made, response.headers)
        return gattway_MHD_queue_response(connection, UInt32(clamping: response.status), made) == .YES
    }

    private func queue(_ connection: OpaquePointer, _ stream: EventStream) -> Bool {
        let binding = StreamBinding(server: self, connection: connection, stream: stream)
        let retained = Unmanaged.passRetained(binding).toOpaque()
        guard
            let made = gattway_MHD_create_response_from_callback(UInt64.max, 4096, streamReader, retained, streamFreed)
        else {
            Unmanaged<StreamBinding>.fromOpaque(retained).release()
            return false
        }
        defer { gattway_MHD_destroy_response(made) }
        Self.addHeaders(made, [("Content-Type", "text/event-stream; charset=utf-8"), ("X-Accel-Buffering", "no")])
        streams[ObjectIdentifier(binding)] = binding
        stream.link = binding
        return gattway_MHD_queue_response(connection, 200, made) == .YES
    }

    private static func addHeaders(_ response: OpaquePointer, _ headers: [(name: String, value: String)]) {
        var names = Set<String>()
        for header in headers {
            names.insert(header.name.lowercased())
            // libmicrohttpd refuses a field with a line break (no header injection).
            _ = gattway_MHD_add_response_header(response, header.name, header.value)
        }
        for header in standardHeaders where !names.contains(header.name.lowercased()) {
            _ = gattway_MHD_add_response_header(response, header.name, header.value)
        }
    }

    private static func headers(_ connection: OpaquePointer) -> [(name: String, value: String)] {
        final class Collected { var fields: [(name: String, value: String)] = [] }
        let collected = Collected()
        withExtendedLifetime(collected) {
            _ = gattway_MHD_get_connection_values(
                connection, .HEADER_KIND,
                { cls, _, key, value in
                    guard let cls, let key else { return .YES }
                    let collected = Unmanaged<Collected>.fromOpaque(cls).takeUnretainedValue()
                    collected.fields.append(
                        (String(cString: key).lowercased(), value.map { String(cString: $0) } ?? ""))
                    return .YES
                }, Unmanaged.passUnretained(collected).toOpaque())
        }
        return collected.fields
    }

    /// Serves on the next turn of the loop: a resumed connection is not announced on the epoll
    /// descriptor (libmicrohttpd's wake-up for it does not reach an external epoll loop).
    func serveSoon() {
        if let timer { loop.cancelTimer(timer) }
        timer = loop.addTimer(after: 0) { [unowned self] in
            timer = nil
            serve()
        }
    }

    fileprivate func streamEnded(_ binding: StreamBinding) {
        streams[ObjectIdentifier(binding)] = nil
        binding.stream.finish()
    }
}

/// A request waiting for its deferred answer: its connection suspended, its timeout armed.
final class PendingReply: DeferredReplyLink {
    unowned let server: HTTPServer
    let connection: OpaquePointer
    let reply: DeferredReply
    var timer: EventLoop.Token?

    init(server: HTTPServer, connection: OpaquePointer, reply: DeferredReply) {
        self.server = server
        self.connection = connection
        self.reply = reply
    }

    func ready() { server.resume(self) }
}

/// An event stream served on a connection: suspends it while nothing waits, resumes it when an
/// event comes, closes it when the stream is dropped.
final class StreamBinding: EventStreamLink {
    unowned let server: HTTPServer
    let connection: OpaquePointer
    let stream: EventStream
    var suspended = false

    init(server: HTTPServer, connection: OpaquePointer, stream: EventStream) {
        self.server = server
        self.connection = connection
        self.stream = stream
    }

    func resume() {
        guard suspended else { return }
        suspended = false
        gattway_MHD_resume_connection(connection)
        server.serveSoon()
    }

    func drop() {
        // Shut down the socket so the connection ends now, even while the client's window is
        // closed (libmicrohttpd would otherwise wait to write before it noticed).
        let fd = gattway_mhd_connection_fd(connection)
        if fd >= 0 { _ = shutdown(fd, Int32(SHUT_RDWR)) }
        resume()
    }

    func read(into buffer: UnsafeMutablePointer<CChar>, max: Int) -> Int {
        guard stream.isOpen else { return -2 }  // MHD_CONTENT_READER_END_WITH_ERROR: close the connection
        let chunk = stream.take(max: max)
        guard !chunk.isEmpty else {
            suspended = true
            gattway_MHD_suspend_connection(connection)
            return 0
        }
        chunk.withUnsafeBytes { bytes in
            UnsafeMutableRawPointer(buffer).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
        }
        return chunk.count
    }
}

// MARK: libmicrohttpd's callbacks (on the loop thread, inside MHD_run)

private let uriLog:
    @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?, OpaquePointer?) ->
        UnsafeMutableRawPointer? = { _, uri, _ in
            let context = HTTPServer.RequestContext(target: uri.map { String(cString: $0) } ?? "")
            return Unmanaged.passRetained(context).toOpaque()
        }

private let requestCompleted: MHD_RequestCompletedCallback = { _, _, contextPointer, _ in
    guard let contextPointer, let raw = contextPointer.pointee else { return }
    Unmanaged<HTTPServer.RequestContext>.fromOpaque(raw).release()
    contextPointer.pointee = nil
}

private let accessHandler: MHD_AccessHandlerCallback = { cls, connection, _, method, _, upload, size, contextPointer in
    guard let cls, let connection, let method, let size, let contextPointer, let raw = contextPointer.pointee else {
        return .NO
    }
    let server = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue()
    let context = Unmanaged<HTTPServer.RequestContext>.fromOpaque(raw).takeUnretainedValue()
    return server.handle(connection, method: String(cString: method), upload: upload, size: size, context: context)
        ? .YES : .NO
}

private let streamReader: MHD_ContentReaderCallback = { cls, _, buffer, max in
    guard let cls, let buffer else { return -2 }
    return Unmanaged<StreamBinding>.fromOpaque(cls).takeUnretainedValue().read(into: buffer, max: max)
}

private let streamFreed: MHD_ContentReaderFreeCallback = { cls in
    guard let cls else { return }
    let binding = Unmanaged<StreamBinding>.fromOpaque(cls).takeRetainedValue()
    binding.server.streamEnded(binding)
}
