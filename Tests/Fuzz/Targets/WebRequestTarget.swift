import HTTPServer

extension FuzzTargets {
    /// What the web server of ours reads from a request (docs/web.md): the request target (path
    /// and query string), the `Authorization` and `Cookie` headers, the CSRF header or form
    /// field, a form body (login), and what the server writes back from untrusted text: event
    /// stream frames and Prometheus label values. libmicrohttpd parses the HTTP framing itself.
    /// Properties: no trap; a parsed query or form re-encodes to fields that parse back equal;
    /// the auth decision lets in only the configured token or a session a login opened with it;
    /// a POST passes the CSRF check only with its identity's token; an event stream never holds
    /// more than its limit; an escaped label value holds no raw line break and unescapes back.
    ///
    /// Encoding: method index, target (chunk), Authorization (chunk), Cookie (chunk), CSRF header
    /// (chunk), content type index, then the body (the rest).
    static let webRequest = FuzzTarget(
        name: "web-request",
        summary: "HTTP request targets, query strings, form bodies, cookies, auth and CSRF headers of the web server",
        seeds: { WebRequestSeeds.all },
        run: { bytes in
            var input = FuzzInput(bytes)
            let method = input.pick(["GET", "POST", "HEAD", "PUT", "get", ""])
            let target = input.string(limit: 255)
            let authorization = input.string(limit: 255)
            let cookie = input.string(limit: 255)
            let csrf = input.string(limit: 128)
            let contentType = input.pick([
                "application/x-www-form-urlencoded", "application/x-www-form-urlencoded; charset=utf-8",
                "application/json",
                "", "APPLICATION/X-WWW-FORM-URLENCODED",
            ])
            let body = input.rest()
            WebRequestChecks.run(
                method: method, target: target, authorization: authorization, cookie: cookie, csrf: csrf,
                contentType: contentType, body: body)
        })
}

enum WebRequestChecks {
    static let token = "fuzz-token-0123456789"

    static func run(
        method: String, target: String, authorization: String, cookie: String, csrf: String, contentType: String,
        body: [UInt8]
    ) {
        // The target and its query string; a parsed one re-encodes to the same fields.
        if let parsed = RequestTarget(target) {
            fuzzProperty(
                parsed.path.utf8.first == UInt8(ascii: "/"), "a target's path does not start with /: \(parsed.path)")
            fuzzProperty(parsed.query.count <= FormEncoding.maxFields, "more query fields than the limit")
            roundTrip(parsed.query)
            var router = HTTPRouter<Int>()
            router.add("GET", "/metrics", 1)
            router.add("GET", "/api/*", 2)
            router.add("POST", "/login", 3)
            if case .found(let route, let rest) = router.match(method: method, path: parsed.path) {
                fuzzProperty(
                    route != 2 || Array(parsed.path.utf8) == Array(("/api/" + rest).utf8),
                    "a prefix route's rest is not the path's tail")
            }
        }
        if let form = FormEncoding.parse(body[...]) { roundTrip(form) }
        let cookies = Cookies.parse(cookie)
        fuzzProperty(cookies.count <= FormEncoding.maxFields, "more cookies than the limit")
        fuzzProperty(cookies.allSatisfy { !$0.name.isEmpty }, "a cookie without a name")

        // Auth: only the token, or a session a login with the token opened.
        let auth = HTTPAuth(HTTPAuth.Credentials(token: token, users: [("ann", "password1")]), clock: { 0 })
        var headers: [(name: String, value: String)] = [("authorization", authorization), ("cookie", cookie)]
        headers.append(("content-type", contentType))
        if !csrf.isEmpty { headers.append(("x-csrf-token", csrf)) }
        let request = HTTPRequest(method: method, path: "/", headers: headers, body: body)
        if let identity = auth.authenticate(request) {
            fuzzProperty(identity == .bearer, "let in without a session having been opened: \(identity)")
            fuzzProperty(HTTPAuth.bearerToken(authorization) == token, "let in with another token: \(authorization)")
        }
        fuzzProperty(
            !auth.checkCSRF(request, identity: .bearer) || csrf == auth.csrfToken(for: .bearer) || !csrf.isEmpty
                || request.formFields?.contains { $0.name == "csrf" } == true, "the CSRF check passed without a token")
        fuzzProperty(!auth.checkCSRF(request, identity: .bearer), "a random CSRF token matched")
        if let fields = request.formFields, let session = auth.login(fields) {
            let token = fields.first { $0.name == "token" }?.value
            let user = fields.first { $0.name == "user" }?.value
            fuzzProperty(token == Self.token || user == "ann", "a login opened a session without the credentials")
            let cookieRequest = HTTPRequest(
                method: "GET", path: "/", headers: [("cookie", "\(HTTPAuth.sessionCookie)=\(session.id)")])
            fuzzProperty(auth.authenticate(cookieRequest) == .session(session.id), "a fresh session is not let in")
        }

        // What goes back out from untrusted text.
        let text = String(decoding: body.prefix(512), as: UTF8.self)
        let stream = EventStream(limit: 1024)
        for piece in [text, target, cookie, text + text] {
            _ = stream.send(event: csrf.isEmpty ? nil : csrf, data: piece)
            fuzzProperty(stream.bufferedBytes <= stream.limit, "an event stream holds more than its limit")
        }
        for value in [text, target, cookie] {
            let escaped = PrometheusText.escapeLabelValue(value)
            fuzzProperty(!escaped.contains("\n"), "an escaped label value has a line break")
            fuzzProperty(unescape(escaped) == value, "escaping a label value lost text: \(value.debugDescription)")
        }
    }

    static func roundTrip(_ fields: [FormField]) {
        let encoded = fields.map { FormEncoding.encode($0.name) + "=" + FormEncoding.encode($0.value) }
            .joined(separator: "&")
        let reparsed = FormEncoding.parse(encoded)?.filter { !$0.name.isEmpty || !$0.value.isEmpty }
        let expected = fields.filter { !$0.name.isEmpty || !$0.value.isEmpty }
        fuzzProperty(reparsed == expected, "fields did not survive encode → parse: \(fields) → \(encoded)")
    }

    /// Prometheus's reading of an escaped label value.
    static func unescape(_ text: String) -> String {
        var out = ""
        var escaping = false
        for scalar in text.unicodeScalars {
            if escaping {
                out.unicodeScalars.append(scalar == "n" ? "\n" : scalar)
                escaping = false
            } else if scalar == "\\" {
                escaping = true
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}

/// Seeds for ``FuzzTargets/webRequest``: the requests docs/web.md shows and the tests send.
enum WebRequestSeeds {
    static let all: [[UInt8]] = {
        func seed(
            method: Int, target: String, authorization: String = "", cookie: String = "", csrf: String = "",
            contentType: Int = 0, body: String = ""
        ) -> [UInt8] {
            var builder = FuzzInputBuilder()
            builder.index(method)
            builder.string(target)
            builder.string(authorization)
            builder.string(cookie)
            builder.string(csrf)
            builder.index(contentType)
            builder.rest(Array(body.utf8))
            return builder.bytes
        }
        return [
            seed(method: 0, target: "/metrics", authorization: "Bearer \(WebRequestChecks.token)"),
            seed(method: 0, target: "/api/devices?name=env%20sensor&limit=10", authorization: "bearer x"),
            seed(method: 1, target: "/login", body: "token=\(WebRequestChecks.token)"),
            seed(method: 1, target: "/login", contentType: 1, body: "user=ann&password=password1"),
            seed(
                method: 1, target: "/logout", cookie: "a=1; gattway_session=\"abc\"; junk", csrf: "0123",
                body: "csrf=%41%zz+"),
            seed(method: 0, target: "/api/events?x=%E2%82%AC&y=a+b&&=", cookie: "=x;;b = 2"),
            seed(method: 3, target: "/%00?%ff", authorization: "Basic Zm9vOmJhcg==", contentType: 2, body: "{\"a\":1}"),
        ]
    }()
}
