import ESPHomeAPI
import EventLoop
import Gateway
import HTTPServer
import JSON
import LocalSystem
import MQTT

/// What the web server serves (docs/web.md, "Routes"): `/metrics`, the JSON API, the event
/// stream, login and logout, behind the auth and CSRF checks of ``HTTPAuth``. Loop-confined: made,
/// started, served and stopped on the loop thread (the invariant behind `@unchecked Sendable`,
/// which lets the service hold it).
final class WebSite: @unchecked Sendable {
    typealias Route = (HTTPRequest, HTTPAuth.Identity) -> HTTPReply

    /// Event streams at once; more are answered 503.
    static let maxEventStreams = 8
    /// Seconds between keep-alive comments on the event streams.
    static let keepAliveInterval = 15.0
    /// Seconds over which the event streams' messages are gathered: each stream gets at most one
    /// event per topic (a device's state, its availability) per interval, the latest.
    static let eventInterval = 1.0

    let config: GatewayConfig
    let loop: EventLoop
    let log: GatewayLogger
    let counters: WebCounters
    let gateway: Gateway
    let mqtt: MQTTClient?
    let auth: HTTPAuth
    private(set) var server: HTTPServer?
    private var router = HTTPRouter<Route>()
    private var streams: [EventStream] = []
    private var keepAlive: EventLoop.Token?
    /// The timer that sends the next events: armed when the core marks an interval's first
    /// (``Gateway/observeDeviceEvents(_:)``), which keeps each device's latest until then.
    private var flushTimer: EventLoop.Token?
    /// The last log lines, for the page (WebSite+Page.swift); nil: none kept.
    var logTail: LogTail?
    /// The configuration file, which the page checks again on request (nil: not known).
    var configPath: String?
    /// The Bluetooth proxy's server, for the page's proxy view (nil: the proxy is off).
    var proxyServer: (() -> APIServer?)?

    init(
        config: GatewayConfig, loop: EventLoop, log: GatewayLogger, counters: WebCounters, gateway: Gateway,
        mqtt: MQTTClient?
    ) {
        self.config = config
        self.loop = loop
        self.log = log
        self.counters = counters
        self.gateway = gateway
        self.mqtt = mqtt
        let started = ContinuousClock.now
        auth = HTTPAuth(
            HTTPAuth.Credentials(token: config.web.token, users: config.web.users.map { ($0.name, $0.password) }),
            clock: {
                let elapsed = ContinuousClock.now - started
                return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            })
        addRoutes()
    }

    /// The server's configuration from `web` (TLS files read now).
    static func serverConfiguration(_ web: WebSettings) throws(HTTPServerError) -> HTTPServerConfiguration {
        var configuration = HTTPServerConfiguration()
        configuration.host = web.host
        configuration.port = web.port
        configuration.maxConnections = web.maxConnections
        configuration.maxBodyBytes = web.maxBodyBytes
        configuration.timeoutSeconds = web.idleTimeoutSeconds
        if let tls = web.tls {
            guard let certificate = LocalFile.read(tls.certFile), let key = LocalFile.read(tls.keyFile) else {
                throw HTTPServerError(description: "cannot read \(tls.certFile) or \(tls.keyFile)")
            }
            configuration.tls = (String(decoding: certificate, as: UTF8.self), String(decoding: key, as: UTF8.self))
        }
        return configuration
    }

    func start() throws(HTTPServerError) {
        let server = try HTTPServer.start(
            Self.serverConfiguration(config.web), loop: loop,
            handlers: HTTPHandlers(
                screen: { [unowned self] in screen($0) }, respond: { [unowned self] in respond($0) },
                refused: { [unowned self] refusal in
                    switch refusal {
                    case .tooLarge: counters.refused(.tooLarge)
                    case .badRequest: counters.refused(.badRequest)
                    case .connectionLimit: counters.refused(.connectionLimit)
                    }
                },
                failed: { [unowned self] problem in
                    counters.update { $0.listening = false }
                    log(.error, "web: stopped serving at the first visit: \(problem)")
                }))
        self.server = server
        counters.update { $0.listening = true }
        let scheme = config.web.tls == nil ? "http" : "https"
        log(
            .notice,
            "web: listening on \(scheme)://\(config.web.host):\(server.port)"
                + (auth.isOpen ? " (no auth: this host only)" : " (auth required)"))
    }

    func stop() {
        observe(false)
        server?.stop()
        server = nil
        streams = []
        counters.update {
            $0.listening = false
            $0.eventClients = 0
        }
    }

    // MARK: Requests

    /// Before the body: who it is (401 unless the login), so a body is never read for a stranger.
    private func screen(_ head: HTTPRequest) -> HTTPResponse? {
        if Self.publicPaths.contains(head.path) { return nil }
        guard auth.authenticate(head) != nil else {
            counters.refused(.unauthorized)
            // The page's address opened without a session: 401 with the page, which asks for the token.
            var response =
                head.path == "/" && head.method != "POST"
                ? Self.loginPage
                : HTTPResponse.text(401, "unauthorized: send Authorization: Bearer <token>, or log in (POST /login)")
            response.headers.append(("WWW-Authenticate", "Bearer realm=\"gattway\""))
            return response
        }
        return nil
    }

    private func respond(_ request: HTTPRequest) -> HTTPReply {
        counters.update { $0.requests += 1 }
        switch router.match(method: request.method, path: request.path) {
        case .notFound:
            return .response(.text(404, "not found"))
        case .methodNotAllowed(let allowed):
            var response = HTTPResponse.text(405, "method not allowed")
            response.headers.append(("Allow", allowed.joined(separator: ", ")))
            return .response(response)
        case .found(let route, _):
            if Self.publicPaths.contains(request.path) { return route(request, .open) }
            guard let identity = auth.authenticate(request) else {
                counters.refused(.unauthorized)
                return .response(.text(401, "unauthorized"))
            }
            if request.method == "POST", !auth.checkCSRF(request, identity: identity) {
                counters.refused(.csrf)
                return .response(
                    .text(403, "forbidden: a POST needs its CSRF token (X-CSRF-Token, from GET /api/session)"))
            }
            return route(request, identity)
        }
    }

    private func addRoutes() {
        // The page (WebSite+Page.swift): "/", its files, and the JSON it reads.
        for (method, path, route) in pageRoutes() { router.add(method, path, route) }
        router.add("GET", "/metrics") { [unowned self] _, _ in
            .response(HTTPResponse(status: 200, contentType: PrometheusText.contentType, body: metrics()))
        }
        router.add("GET", "/api/health") { [unowned self] _, _ in
            json(gateway.assumeLoopIsolated { $0.currentHealth })
        }
        router.add("GET", "/api/devices") { [unowned self] _, _ in
            json(gateway.assumeLoopIsolated { $0.devicesPayload })
        }
        router.add("GET", "/api/session") { [unowned self] _, identity in
            json(.object([("auth", .string(Self.name(identity))), ("csrf", .string(auth.csrfToken(for: identity)))]))
        }
        router.add("GET", "/api/events") { [unowned self] _, _ in events() }
        router.add("POST", "/login") { [unowned self] request, _ in login(request) }
        router.add("POST", "/logout") { [unowned self] _, identity in
            auth.end(identity)
            var response = HTTPResponse(status: 204)
            response.headers.append(
                ("Set-Cookie", "\(HTTPAuth.sessionCookie)=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict"))
            return .response(response)
        }
    }

    static func name(_ identity: HTTPAuth.Identity) -> String {
        switch identity {
        case .open: "open"
        case .bearer: "bearer"
        case .session: "session"
        }
    }

    func json(_ value: JSONValue, status: Int = 200) -> HTTPReply {
        .response(HTTPResponse(status: status, contentType: "application/json", body: Self.bytes(value)))
    }

    private func login(_ request: HTTPRequest) -> HTTPReply {
        guard let fields = request.formFields else {
            counters.refused(.badRequest)
            return .response(
                .text(400, "expected a form (application/x-www-form-urlencoded) with token, or user and password"))
        }
        guard let session = auth.login(fields) else {
            counters.refused(.loginFailed)
            log(.warning, "web: a login failed")
            return .response(.text(401, "login failed"))
        }
        log(.notice, "web: a login opened a session")
        var headers: [(name: String, value: String)] = [("Content-Type", "application/json")]
        let secure = config.web.tls == nil ? "" : "; Secure"
        headers.append(
            ("Set-Cookie", "\(HTTPAuth.sessionCookie)=\(session.id); Path=/; HttpOnly; SameSite=Strict\(secure)"))
        var body: [UInt8] = []
        JSONValue.object([("csrf", .string(session.csrf))]).write(into: &body)
        return .response(HTTPResponse(status: 200, headers: headers, body: body))
    }

    // MARK: /metrics

    func metrics() -> [UInt8] {
        let (health, devices, free) = gateway.assumeLoopIsolated {
            ($0.currentHealth, $0.deviceSnapshots, $0.freeConnectionSlots)
        }
        return MetricsExporter.render(
            MetricsExporter.Inputs(
                health: health, devices: devices, mqttBacklog: mqtt?.backlogCount ?? 0,
                mqttBacklogLimit: mqtt?.configuration.maxQueued, freeSlots: free,
                maxConnections: config.bluetooth.maxConnections, web: counters.snapshot))
    }

    // MARK: /api/events

    private func events() -> HTTPReply {
        streams.removeAll { !$0.isOpen }
        guard streams.count < Self.maxEventStreams else {
            counters.refused(.eventStreamsFull)
            return .response(.text(503, "too many event streams (at most \(Self.maxEventStreams))"))
        }
        let stream = EventStream(limit: config.web.eventBufferBytes)
        stream.onClose = { [unowned self, unowned stream] in closed(stream) }
        streams.append(stream)
        counters.update { $0.eventClients = streams.count }
        stream.send(event: "hello", data: #"{"version":"\#(BuildInfo.version)"}"#)
        observe(true)
        return .events(stream)
    }

    private func closed(_ stream: EventStream) {
        streams.removeAll { $0 === stream || !$0.isOpen }
        counters.update {
            $0.eventClients = streams.count
            if stream.wasDropped { $0.eventClientsDropped += 1 }
        }
        if stream.wasDropped { log(.warning, "web: an event-stream client read too slowly and was dropped") }
        if streams.isEmpty { observe(false) }
    }

    /// Watches the core's device messages while an event stream is open (none costs nothing).
    private func observe(_ on: Bool) {
        if on, keepAlive == nil {
            // The core marks each device's state and availability as it publishes them (the
            // latest of each, no copy: ``Gateway/observeDeviceEvents(_:)``) and says when an
            // interval's first comes; the flush, an interval later, makes them events: once per
            // topic and interval however often the device reports.
            gateway.assumeLoopIsolated {
                $0.observeDeviceEvents { [unowned self] in
                    guard flushTimer == nil else { return }
                    flushTimer = loop.addTimer(after: Self.eventInterval) { [unowned self] in
                        flushTimer = nil
                        flush()
                    }
                }
            }
            scheduleKeepAlive()
        } else if !on, let keepAlive {
            loop.cancelTimer(keepAlive)
            self.keepAlive = nil
            if let flushTimer { loop.cancelTimer(flushTimer) }
            flushTimer = nil
            gateway.assumeLoopIsolated { $0.observeDeviceEvents(nil) }
        }
    }

    /// Sends the marked messages as events to every stream: all of them written at once, so a
    /// stream is woken once per flush, not once per event. Not inlined: callgrind counts it per
    /// call (scripts/callgrind-per-report.py).
    @inline(never)
    private func flush() {
        var events: [UInt8] = []
        for event in gateway.assumeLoopIsolated({ $0.takeDeviceEvents() }) {
            Self.writeEvent(event, into: &events)
        }
        guard !events.isEmpty else { return }
        for stream in streams { stream.send(events: events) }
    }

    private func scheduleKeepAlive() {
        keepAlive = loop.addTimer(after: Self.keepAliveInterval) { [unowned self] in
            for stream in streams { stream.comment("keep-alive") }
            scheduleKeepAlive()
        }
    }

    /// A device's message written as the stream sends it onto `events`: `event: reading` for
    /// its state (`<base>/<device>`), `event: availability` for `<base>/<device>/availability`,
    /// then one `data:` line, `{"device":…,"payload":…}` with the payload as JSON when it is
    /// JSON, else a string, and the blank line that ends the event. Runs for each device's
    /// latest message every ``eventInterval``.
    static func writeEvent(_ event: DeviceEvent, into events: inout [UInt8]) {
        events += (event.availability ? "event: availability\ndata: " : "event: reading\ndata: ").utf8
        events += #"{"device":"#.utf8
        JSONValue.writeString(event.device, into: &events)
        events += #","payload":"#.utf8
        // A state message is the core's own JSON object, one line: put in as it is. Anything
        // else is checked, and sent as a string when it is not JSON (the writer escapes line
        // breaks, so the data stays one line).
        let payload = event.payload
        if !event.availability, payload.first == UInt8(ascii: "{"), payload.last == UInt8(ascii: "}"),
            !payload.contains(where: { $0 == 0x0A || $0 == 0x0D })
        {
            events += payload
        } else {
            let value = (try? JSONValue.parse(payload)) ?? .string(String(decoding: payload, as: UTF8.self))
            value.write(into: &events)
        }
        events += "}\n\n".utf8
    }
}
