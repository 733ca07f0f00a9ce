/// Routes a request's method and path to what was registered for them: an exact path
/// (`/metrics`) or a prefix ending in `/*` (`/api/devices/*`, the rest of the path handed on).
/// Exact routes win over prefixes; the longest prefix wins among prefixes.
public struct HTTPRouter<Handler> {
    private struct Route {
        var method: String
        var pattern: String
        var prefix: Bool
        var handler: Handler
    }
    private var routes: [Route] = []

    /// What a request's method and path find.
    public enum Match {
        /// The handler, and the rest of the path after a prefix route's `/` ("" for exact routes).
        case found(Handler, rest: String)
        /// The path exists, with other methods (405, `Allow` lists them).
        case methodNotAllowed(allowed: [String])
        case notFound
    }

    public init() {}

    /// Registers `handler` for `method` (upper case: GET, POST, …) and `path`; a path ending in
    /// `/*` matches every path below it. A later registration of the same method and path replaces
    /// the earlier one.
    public mutating func add(_ method: String, _ path: String, _ handler: Handler) {
        let prefix = path.hasSuffix("/*")
        let pattern = prefix ? String(path.dropLast()) : path
        routes.removeAll { $0.method == method && $0.pattern == pattern && $0.prefix == prefix }
        routes.append(Route(method: method, pattern: pattern, prefix: prefix, handler: handler))
    }

    /// Paths are compared byte for byte (UTF-8), not as Swift's characters: a combining mark
    /// after a `/` must not make `/api/…` another path, nor canonical equivalence two paths one.
    public func match(method: String, path: String) -> Match {
        let bytes = Array(path.utf8)
        var candidates = routes.filter { !$0.prefix && Array($0.pattern.utf8) == bytes }
        var rest = ""
        if candidates.isEmpty {
            let prefixes = routes.filter {
                $0.prefix && bytes.starts(with: $0.pattern.utf8) && bytes.count > $0.pattern.utf8.count
            }
            if let longest = prefixes.map({ $0.pattern.utf8.count }).max() {
                candidates = prefixes.filter { $0.pattern.utf8.count == longest }
                rest = String(decoding: bytes[longest...], as: UTF8.self)
            }
        }
        guard !candidates.isEmpty else { return .notFound }
        // HEAD is answered by GET's handler (libmicrohttpd leaves the body out).
        let wanted = method == "HEAD" ? "GET" : method
        if let route = candidates.first(where: { $0.method == wanted }) { return .found(route.handler, rest: rest) }
        return .methodNotAllowed(allowed: candidates.map(\.method))
    }
}
