/// One request as the handlers see it: the method, the path and the query string of the request
/// target (parsed by ``RequestTarget``, not by libmicrohttpd), the header fields (names in lower
/// case) and the body (at most ``HTTPServerConfiguration/maxBodyBytes``).
public struct HTTPRequest: Sendable {
    public var method: String
    public var path: String
    public var query: [FormField]
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(
        method: String, path: String, query: [FormField] = [], headers: [(name: String, value: String)] = [],
        body: [UInt8] = []
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
    }

    /// The first header field named `name` (any case).
    public func header(_ name: String) -> String? {
        let lower = name.lowercased()
        return headers.first { $0.name == lower }?.value
    }

    /// The first query parameter named `name`.
    public func queryValue(_ name: String) -> String? { query.first { $0.name == name }?.value }

    /// The cookies of the `Cookie` header (``Cookies/parse(_:)``).
    public var cookies: [FormField] { header("cookie").map(Cookies.parse) ?? [] }

    /// The fields of an `application/x-www-form-urlencoded` body; nil when the body is of another
    /// type or malformed.
    public var formFields: [FormField]? {
        guard let type = header("content-type"),
            type.lowercased().split(separator: ";").first?.trimmingSpaces == "application/x-www-form-urlencoded"
        else { return nil }
        return FormEncoding.parse(body[...])
    }
}

/// A name and a value of a query string, a form body or a cookie.
public struct FormField: Sendable, Equatable {
    public var name: String
    public var value: String

    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

/// A complete response: status, header fields and body.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A response with a body of `contentType`.
    public init(status: Int, contentType: String, body: [UInt8]) {
        self.init(status: status, headers: [("Content-Type", contentType)], body: body)
    }

    /// A plain-text response (the error answers: `401 unauthorized\n`).
    public static func text(_ status: Int, _ text: String) -> HTTPResponse {
        HTTPResponse(status: status, contentType: "text/plain; charset=utf-8", body: Array((text + "\n").utf8))
    }
}

/// What a handler answers: a response, a stream of Server-Sent Events the caller keeps and
/// pushes events into, or a response that comes later (``DeferredReply``).
public enum HTTPReply {
    case response(HTTPResponse)
    case events(EventStream)
    case deferred(DeferredReply)
}

/// A response a handler gives later — when an operation it started ends: the connection is
/// suspended until ``answer(_:)`` (or the timeout, which answers 504; or the server's stop, 503).
/// Only the first answer counts. Loop-confined: made by a handler, answered on the loop thread.
public final class DeferredReply {
    /// Seconds until the server answers 504 itself.
    public let timeout: Double
    /// Called once when the server answered for the handler (timeout or stop), so that it can
    /// stop waiting for its operation; not called after ``answer(_:)``.
    public var onAbandon: (() -> Void)?
    /// Set by the server while the connection waits.
    var link: (any DeferredReplyLink)?
    /// The answer, once given.
    private(set) var response: HTTPResponse?

    public init(timeout: Double) { self.timeout = timeout }

    /// Whether it was answered (by the handler or the server).
    public var isAnswered: Bool { response != nil }

    /// Answers the request (the first answer only).
    public func answer(_ response: HTTPResponse) {
        guard self.response == nil else { return }
        self.response = response
        onAbandon = nil
        let link = self.link
        self.link = nil
        link?.ready()
    }

    /// The server answers in the handler's place: the handler's answer is no longer awaited.
    func abandon(_ response: HTTPResponse) {
        guard self.response == nil else { return }
        let abandoned = onAbandon
        answer(response)
        abandoned?()
    }
}

/// What a deferred reply asks of the server that holds its connection.
protocol DeferredReplyLink: AnyObject {
    /// The answer is there: resume the connection and send it.
    func ready()
}

extension Substring {
    var trimmingSpaces: Substring {
        var text = self
        while let first = text.first, first == " " || first == "\t" { text.removeFirst() }
        while let last = text.last, last == " " || last == "\t" { text.removeLast() }
        return text
    }
}
