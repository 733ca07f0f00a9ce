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

/// What a handler answers: a response, or a stream of Server-Sent Events the caller keeps and
/// pushes events into.
public enum HTTPReply {
    case response(HTTPResponse)
    case events(EventStream)
}

extension Substring {
    var trimmingSpaces: Substring {
        var text = self
        while let first = text.first, first == " " || first == "\t" { text.removeFirst() }
        while let last = text.last, last == " " || last == "\t" { text.removeLast() }
        return text
    }
}
