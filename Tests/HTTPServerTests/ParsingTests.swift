import HTTPServer
import Testing

@Suite("Request targets, query strings, form bodies and cookies")
struct ParsingTests {
    @Test("a target's path and query fields, percent and plus decoded")
    func target() throws {
        let target = try #require(RequestTarget("/api/devices?name=env%20sensor&x=a+b&flag&empty="))
        #expect(target.path == "/api/devices")
        #expect(
            target.query == [
                FormField("name", "env sensor"), FormField("x", "a b"), FormField("flag", ""), FormField("empty", ""),
            ])
        #expect(RequestTarget("/metrics")?.query == [])
        #expect(RequestTarget("/a?")?.query == [])
    }

    @Test(
        "targets that are not a path, or carry a bad escape, control bytes or a fragment, are refused",
        arguments: [
            "", "metrics", "http://host/metrics", "*", "/a b", "/a\u{7F}", "/a#frag", "/a?x=%zz", "/a?x=%4", "/a?x=%ff",
            "/a\u{01}",
        ])
    func badTargets(_ text: String) {
        #expect(RequestTarget(text) == nil)
    }

    @Test("more than 64 fields are refused, 64 are fine")
    func fieldLimit() {
        let fields = (0..<64).map { "f\($0)=\($0)" }.joined(separator: "&")
        #expect(FormEncoding.parse(fields)?.count == 64)
        #expect(FormEncoding.parse(fields + "&one=more") == nil)
    }

    @Test("encode and decode are inverse, also for UTF-8 and reserved characters")
    func roundTrip() {
        for text in ["a b&c=d", "ä€😀", "%+/?#", ""] {
            #expect(FormEncoding.decode(Array(FormEncoding.encode(text).utf8)[...]) == text)
        }
    }

    @Test("cookies: pairs split on semicolons, spaces trimmed, quotes removed, pairs without = skipped")
    func cookies() {
        #expect(
            Cookies.parse(#"a=1; gattway_session="abc" ;junk; =x; b = 2"#) == [
                FormField("a", "1"), FormField("gattway_session", "abc"), FormField("b", "2"),
            ])
        #expect(Cookies.parse("") == [])
    }

    @Test("a form body is read only with the form media type")
    func formBody() {
        var request = HTTPRequest(
            method: "POST", path: "/login",
            headers: [("content-type", "application/x-www-form-urlencoded; charset=UTF-8")],
            body: Array("token=abc%21".utf8))
        #expect(request.formFields == [FormField("token", "abc!")])
        request.headers = [("content-type", "application/json")]
        #expect(request.formFields == nil)
        request.headers = []
        #expect(request.formFields == nil)
    }
}

@Suite("Routing")
struct RouterTests {
    @Test("exact routes, prefix routes (longest wins), 405 with the allowed methods, 404, HEAD as GET")
    func routes() {
        var router = HTTPRouter<String>()
        router.add("GET", "/metrics", "metrics")
        router.add("GET", "/api/*", "api")
        router.add("GET", "/api/devices/*", "device")
        router.add("POST", "/api/devices/*", "device-post")
        router.add("POST", "/login", "login")
        func found(_ method: String, _ path: String) -> String? {
            if case .found(let handler, let rest) = router.match(method: method, path: path) {
                return "\(handler):\(rest)"
            }
            return nil
        }
        #expect(found("GET", "/metrics") == "metrics:")
        #expect(found("HEAD", "/metrics") == "metrics:")
        #expect(found("GET", "/api/health") == "api:health")
        #expect(found("GET", "/api/devices/lamp") == "device:lamp")
        #expect(found("POST", "/api/devices/lamp") == "device-post:lamp")
        #expect(found("GET", "/api/") == nil)
        if case .methodNotAllowed(let allowed) = router.match(method: "GET", path: "/login") {
            #expect(allowed == ["POST"])
        } else {
            Issue.record("GET /login should be 405")
        }
        if case .notFound = router.match(method: "GET", path: "/nowhere") {} else { Issue.record("expected 404") }
        if case .notFound = router.match(method: "GET", path: "/metricsx") {} else { Issue.record("expected 404") }
        // Bytes, not characters: a combining mark after the prefix's slash is the rest of the path.
        #expect(found("GET", "/api/\u{0656}x") == "api:\u{0656}x")
        #expect(found("GET", "/metrics\u{0301}") == nil)
        // A later registration replaces an earlier one.
        router.add("GET", "/metrics", "metrics2")
        #expect(found("GET", "/metrics") == "metrics2:")
    }
}
