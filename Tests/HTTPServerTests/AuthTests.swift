import Testing

@testable import HTTPServer

@Suite("Auth and CSRF decisions")
struct AuthTests {
    static let token = "0123456789abcdef-token"

    final class Clock: @unchecked Sendable { var now = 0.0 }

    static func request(_ headers: [(String, String)], method: String = "GET", body: String = "") -> HTTPRequest {
        HTTPRequest(
            method: method, path: "/x", headers: headers.map { ($0.0.lowercased(), $0.1) }, body: Array(body.utf8))
    }

    @Test("open (no credentials): everyone is let in; a POST still needs the CSRF token")
    func open() {
        let auth = HTTPAuth(HTTPAuth.Credentials(), clock: { 0 })
        let identity = auth.authenticate(Self.request([]))
        #expect(identity == .open)
        #expect(!auth.checkCSRF(Self.request([], method: "POST"), identity: .open))
        #expect(
            auth.checkCSRF(
                Self.request([("X-CSRF-Token", auth.csrfToken(for: .open))], method: "POST"), identity: .open))
        #expect(auth.login([FormField("token", "x")]) == nil)
    }

    @Test("bearer: the right token in any scheme case is let in; a wrong, longer, shorter or missing one is not")
    func bearer() {
        let auth = HTTPAuth(HTTPAuth.Credentials(token: Self.token), clock: { 0 })
        #expect(auth.authenticate(Self.request([("Authorization", "Bearer \(Self.token)")])) == .bearer)
        #expect(auth.authenticate(Self.request([("Authorization", "bearer  \(Self.token) ")])) == .bearer)
        for wrong in [Self.token + "x", String(Self.token.dropLast()), "", "Basic abc"] {
            #expect(auth.authenticate(Self.request([("Authorization", "Bearer \(wrong)")])) == nil, "\(wrong)")
        }
        #expect(auth.authenticate(Self.request([("Authorization", "Basic \(Self.token)")])) == nil)
        #expect(auth.authenticate(Self.request([])) == nil)
        // A made-up session cookie is no way in.
        #expect(auth.authenticate(Self.request([("Cookie", "\(HTTPAuth.sessionCookie)=abc")])) == nil)
    }

    @Test("a login opens a session: its cookie lets in, its own CSRF token is needed, it expires and ends at logout")
    func sessions() throws {
        let clock = Clock()
        let auth = HTTPAuth(
            HTTPAuth.Credentials(token: Self.token, users: [("ann", "password1")]), clock: { clock.now })
        #expect(auth.login([FormField("token", "wrong")]) == nil)
        #expect(auth.login([FormField("user", "ann"), FormField("password", "password2")]) == nil)
        #expect(auth.login([FormField("user", "bob"), FormField("password", "password1")]) == nil)
        let session = try #require(auth.login([FormField("user", "ann"), FormField("password", "password1")]))
        let cookie = ("Cookie", "other=1; \(HTTPAuth.sessionCookie)=\(session.id)")
        let identity = try #require(auth.authenticate(Self.request([cookie])))
        #expect(identity == .session(session.id))
        #expect(auth.csrfToken(for: identity) == session.csrf)
        #expect(auth.checkCSRF(Self.request([("X-CSRF-Token", session.csrf)], method: "POST"), identity: identity))
        #expect(
            auth.checkCSRF(
                Self.request(
                    [("Content-Type", "application/x-www-form-urlencoded")], method: "POST",
                    body: "a=1&csrf=\(session.csrf)"),
                identity: identity))
        // Another identity's token does not do.
        #expect(
            !auth.checkCSRF(
                Self.request([("X-CSRF-Token", auth.csrfToken(for: .bearer))], method: "POST"), identity: identity))
        clock.now = HTTPAuth.sessionLifetime + 1
        #expect(auth.authenticate(Self.request([cookie])) == nil)
        let second = try #require(auth.login([FormField("token", Self.token)]))
        let secondIdentity = HTTPAuth.Identity.session(second.id)
        auth.end(secondIdentity)
        #expect(auth.authenticate(Self.request([("Cookie", "\(HTTPAuth.sessionCookie)=\(second.id)")])) == nil)
    }

    @Test("sessions are bounded: a login beyond the limit ends the oldest")
    func sessionLimit() throws {
        let clock = Clock()
        let auth = HTTPAuth(HTTPAuth.Credentials(token: Self.token), clock: { clock.now })
        var ids: [String] = []
        for index in 0..<(HTTPAuth.maxSessions + 5) {
            clock.now = Double(index)
            ids.append(try #require(auth.login([FormField("token", Self.token)])).id)
        }
        #expect(auth.sessionCount == HTTPAuth.maxSessions)
        #expect(auth.authenticate(Self.request([("Cookie", "\(HTTPAuth.sessionCookie)=\(ids[0])")])) == nil)
        #expect(auth.authenticate(Self.request([("Cookie", "\(HTTPAuth.sessionCookie)=\(ids.last!)")])) != nil)
    }

    @Test("constant-time comparison answers like ==")
    func comparison() {
        for (a, b) in [("", ""), ("a", "a"), ("a", "b"), ("ab", "a"), ("a", "ab"), ("token", "tokem"), ("ä", "a")] {
            #expect(HTTPAuth.constantTimeEquals(a, b) == (a == b), "\(a) \(b)")
        }
        #expect(HTTPAuth.randomToken().count == 64)
        #expect(HTTPAuth.randomToken() != HTTPAuth.randomToken())
    }
}

@Suite("Prometheus's text format")
struct PrometheusTextTests {
    @Test("HELP and TYPE once per family, labels escaped, values formatted")
    func format() {
        var text = PrometheusText()
        text.family("gattway_device_rssi_dbm", .gauge, help: "RSSI\\ of a \"device\"\nper device.")
        text.sample([("name", "a\"b\\c\nd"), ("address", "AA")], -70)
        text.sample([("name", "plain")], 1.5)
        text.single("gattway_x_total", .counter, help: "x", 3)
        text.single("gattway_nan", .gauge, help: "n", .nan)
        text.single("gattway_inf", .gauge, help: "i", -.infinity)
        #expect(
            String(decoding: text.bytes, as: UTF8.self) == """
                # HELP gattway_device_rssi_dbm RSSI\\\\ of a "device"\\nper device.
                # TYPE gattway_device_rssi_dbm gauge
                gattway_device_rssi_dbm{name="a\\"b\\\\c\\nd",address="AA"} -70
                gattway_device_rssi_dbm{name="plain"} 1.5
                # HELP gattway_x_total x
                # TYPE gattway_x_total counter
                gattway_x_total 3
                # HELP gattway_nan n
                # TYPE gattway_nan gauge
                gattway_nan NaN
                # HELP gattway_inf i
                # TYPE gattway_inf gauge
                gattway_inf -Inf

                """)
    }

    @Test("names: metric names may have colons, label names may not start with __")
    func names() {
        #expect(PrometheusText.isMetricName("gattway:x_1"))
        #expect(
            !PrometheusText.isMetricName("1x") && !PrometheusText.isMetricName("a-b")
                && !PrometheusText.isMetricName(""))
        #expect(
            PrometheusText.isLabelName("name") && !PrometheusText.isLabelName("__name")
                && !PrometheusText.isLabelName("a:b"))
        #expect(PrometheusText.format(1e20) == "1e+20")
        #expect(PrometheusText.format(-3) == "-3")
    }
}

@Suite("Event streams")
struct EventStreamTests {
    @Test("events are framed with event and data lines (one per line); comments; a stream over its limit drops")
    func framing() {
        let stream = EventStream(limit: 100)
        var closed = 0
        stream.onClose = { closed += 1 }
        #expect(stream.send(event: "reading\nx", data: "a\nb"))
        #expect(stream.bufferedBytes == "event: readingx\ndata: a\ndata: b\n\n".utf8.count)
        #expect(stream.comment("k"))
        #expect(!stream.send(data: String(repeating: "z", count: 100)))
        #expect(stream.wasDropped && !stream.isOpen && stream.bufferedBytes == 0 && closed == 1)
        #expect(!stream.send(data: "after"))
        #expect(closed == 1)
    }

    @Test("one write larger than the limit reaches a client that has read everything; unread, the next drops it")
    func largeWriteToAClientCaughtUp() {
        // A second's events of 300 devices are more than the default 64 KiB: a client that keeps
        // up must not be dropped for it (it was, at every flush).
        let stream = EventStream(limit: 100)
        let second = Array(repeating: UInt8(ascii: "x"), count: 250)
        #expect(stream.send(events: second))
        #expect(stream.isOpen && stream.bufferedBytes == 250)
        #expect(stream.take(max: 1000).count == 250, "the client reads it all")
        #expect(stream.send(events: second), "caught up again: the next second's events whole")
        #expect(
            !stream.send(events: Array("data: 1\n\n".utf8)),
            "the client has not read the first: behind by more than the limit")
        #expect(stream.wasDropped && !stream.isOpen && stream.bufferedBytes == 0)
    }
}
