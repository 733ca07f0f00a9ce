import Gateway
import HTTPServer
import JSON

/// The web page's routes (docs/web.md, "The page"): the page and its files from the binary
/// (``WebPageAssets``), and the JSON it reads beside the API's — the devices with their last
/// readings and link state, a device's readings history, the radio's view and a suggested rule.
extension WebSite {
    /// Paths answered without a session: the login (the page itself, which asks for the token;
    /// `/` without a session answers 401 with it too) and the page's style sheet and script,
    /// which hold no data.
    static let publicPaths: Set<String> = ["/login", "/page.css", "/page.js"]

    /// Headers of the page's files: no script, style or connection but this server's, no framing.
    static let pageHeaders: [(name: String, value: String)] = [
        (
            "Content-Security-Policy",
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
                + "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
        ),
        ("X-Content-Type-Options", "nosniff"), ("Cache-Control", "no-cache"), ("Referrer-Policy", "no-referrer"),
    ]

    /// The page as the answer to `/` without a session: 401, and the page, which asks for the token.
    static let loginPage = HTTPResponse(
        status: 401, headers: [("Content-Type", "text/html; charset=utf-8")] + pageHeaders,
        body: Array(WebPageAssets.index_html.utf8))

    func pageRoutes() -> [(method: String, path: String, route: Route)] {
        var routes: [(method: String, path: String, route: Route)] = []
        for file in WebPageAssets.files {
            let response = HTTPResponse(
                status: 200, headers: [("Content-Type", file.contentType)] + Self.pageHeaders,
                body: Array(file.body.utf8))
            routes.append(("GET", file.path, { _, _ in .response(response) }))
            // The login at its own address too (200: a login is not refused).
            if file.path == "/" { routes.append(("GET", "/login", { _, _ in .response(response) })) }
        }
        // The JSON the page reads, each read on the loop; 404 when there is none (an unknown
        // device, the radio's view off, no rule to suggest).
        let reads: [(path: String, query: String?, read: @Sendable (isolated Gateway, String) -> JSONValue?)] = [
            ("/api/page/devices", nil, { gateway, _ in gateway.pageDevices }),
            ("/api/page/history", "device", { gateway, device in gateway.history(of: device) }),
            ("/api/page/rule", "address", { gateway, address in gateway.pageRule(for: address) }),
        ]
        // The radio's view, written as JSON text by the core (every 2 s while the page shows it).
        routes.append(
            (
                "GET", "/api/page/radio",
                { [unowned self] _, _ in
                    guard let body = gateway.assumeLoopIsolated({ $0.pageRadioText() }) else { return notFound }
                    return .response(HTTPResponse(status: 200, contentType: "application/json", body: body + [0x0A]))
                }
            ))
        routes.append(("GET", "/api/page/log", { [unowned self] _, _ in found(logTail?.json) }))
        // The page's actions: the bridge requests the core answers at once, as POSTs (the server
        // checked the CSRF token), each logged.
        for verb in Gateway.pageVerbs.sorted() {
            routes.append(
                (
                    "POST", "/api/page/request/" + verb,
                    { [unowned self] request, identity in
                        log(.notice, "web: \(verb) requested from the page (\(Self.name(identity)))")
                        return found(gateway.assumeLoopIsolated { $0.pageRequest(verb: verb, payload: request.body) })
                    }
                ))
        }
        routes.append(
            (
                "GET", "/api/page/config",
                { [unowned self] _, _ in
                    found(configPath.map { path in gateway.assumeLoopIsolated { $0.pageConfigCheck(path: path) } })
                }
            ))
        for (path, query, read) in reads {
            routes.append(
                (
                    "GET", path,
                    { [unowned self] request, _ in
                        let argument = query.map { request.queryValue($0) } ?? ""
                        guard let argument else { return found(nil) }
                        return found(gateway.assumeLoopIsolated { read($0, argument) })
                    }
                ))
        }
        return routes + viewRoutes()
    }

    var notFound: HTTPReply { .response(.text(404, "not found")) }

    /// The value as JSON, or 404 when there is none.
    func found(_ value: JSONValue?) -> HTTPReply {
        guard let value else { return notFound }
        return json(value)
    }
}
