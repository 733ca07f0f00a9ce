/// Who may use the web server, and the CSRF tokens of state-changing requests (docs/web.md,
/// "Auth"). Loop-confined (the server's handlers run on the loop thread).
///
/// With no credentials configured every request is let in (`listen` on loopback only; the
/// configuration refuses an open server on any other address). Otherwise a request is let in with
/// `Authorization: Bearer <token>` or the cookie of a session a login opened (`POST /login`
/// with the token, or a user and password of the users file); secrets are compared in constant
/// time. A POST must also carry the CSRF token of its identity (the `X-CSRF-Token` header or a
/// `csrf` form field): a page of another origin cannot read it, so it cannot forge the POST.
public final class HTTPAuth {
    /// What lets a request in.
    public struct Credentials: Sendable {
        public var token: String?
        /// A user name and its password (the users file).
        public var users: [(name: String, password: String)]

        public init(token: String? = nil, users: [(name: String, password: String)] = []) {
            self.token = token
            self.users = users
        }

        /// No token and no users: the server is open.
        public var isOpen: Bool { token == nil && users.isEmpty }
    }

    /// Who a request was let in as.
    public enum Identity: Equatable, Sendable {
        /// No credentials are configured.
        case open
        /// The bearer token.
        case bearer
        /// A login session (its identifier, the cookie's value).
        case session(String)
    }

    /// The session cookie's name.
    public static let sessionCookie = "gattway_session"
    /// Sessions kept at once; a login beyond ends the oldest.
    public static let maxSessions = 32
    /// How long a session lasts after its login, in seconds.
    public static let sessionLifetime: Double = 12 * 3600

    private struct Session {
        var csrf: String
        var expires: Double
        var created: Double
    }

    private let credentials: Credentials
    private let clock: () -> Double
    private var sessions: [String: Session] = [:]
    /// The CSRF token of requests without a session (bearer or open): one per process.
    private let processCSRF: String

    /// - Parameter clock: monotonic seconds (sessions expire on it).
    public init(_ credentials: Credentials, clock: @escaping () -> Double) {
        self.credentials = credentials
        self.clock = clock
        processCSRF = Self.randomToken()
    }

    public var isOpen: Bool { credentials.isOpen }

    /// Who `request` is, or nil: refused (401).
    public func authenticate(_ request: HTTPRequest) -> Identity? {
        if credentials.isOpen { return .open }
        if let header = request.header("authorization"), let token = Self.bearerToken(header) {
            guard let expected = credentials.token, Self.constantTimeEquals(token, expected) else { return nil }
            return .bearer
        }
        guard let id = request.cookies.first(where: { $0.name == Self.sessionCookie })?.value else { return nil }
        let now = clock()
        // The identifier has 256 random bits: guessing one is hopeless, so a lookup by it leaks nothing useful.
        guard let session = sessions[id] else { return nil }
        guard session.expires > now else {
            sessions[id] = nil
            return nil
        }
        return .session(id)
    }

    /// Opens a session for the login form's fields (`token`, or `user` and `password`); nil when
    /// they do not match (or the server is open: there is nothing to log in to).
    public func login(_ fields: [FormField]) -> (id: String, csrf: String)? {
        func field(_ name: String) -> String? { fields.first { $0.name == name }?.value }
        var matched = false
        if let token = field("token"), let expected = credentials.token {
            matched = Self.constantTimeEquals(token, expected)
        } else if let user = field("user"), let password = field("password") {
            // Every user is compared, so the time does not tell which names exist.
            for entry in credentials.users {
                let both =
                    Self.constantTimeEquals(entry.name, user) && Self.constantTimeEquals(entry.password, password)
                matched = matched || both
            }
        }
        guard matched else { return nil }
        let now = clock()
        sessions = sessions.filter { $0.value.expires > now }
        while sessions.count >= Self.maxSessions, let oldest = sessions.min(by: { $0.value.created < $1.value.created })
        {
            sessions[oldest.key] = nil
        }
        let id = Self.randomToken()
        let csrf = Self.randomToken()
        sessions[id] = Session(csrf: csrf, expires: now + Self.sessionLifetime, created: now)
        return (id, csrf)
    }

    /// Ends a session (logout).
    public func end(_ identity: Identity) {
        if case .session(let id) = identity { sessions[id] = nil }
    }

    /// The CSRF token `identity` must send with a POST.
    public func csrfToken(for identity: Identity) -> String {
        if case .session(let id) = identity, let session = sessions[id] { return session.csrf }
        return processCSRF
    }

    /// Whether `request` carries the CSRF token of `identity` (`X-CSRF-Token`, else the form
    /// field `csrf`).
    public func checkCSRF(_ request: HTTPRequest, identity: Identity) -> Bool {
        let sent = request.header("x-csrf-token") ?? request.formFields?.first { $0.name == "csrf" }?.value
        guard let sent else { return false }
        return Self.constantTimeEquals(sent, csrfToken(for: identity))
    }

    /// Sessions open now (for tests and the health section).
    public var sessionCount: Int { sessions.count }

    /// The token of `Authorization: Bearer <token>` (the scheme in any case); nil for other schemes.
    public static func bearerToken(_ header: String) -> String? {
        let trimmed = Substring(header).trimmingSpaces
        guard let space = trimmed.firstIndex(of: " "), trimmed[..<space].lowercased() == "bearer" else { return nil }
        let token = trimmed[trimmed.index(after: space)...].trimmingSpaces
        return token.isEmpty ? nil : String(token)
    }

    /// Compares two secrets in time that depends on their lengths only, never on where they differ.
    public static func constantTimeEquals(_ a: String, _ b: String) -> Bool {
        let left = Array(a.utf8)
        let right = Array(b.utf8)
        var difference = UInt8(left.count == right.count ? 0 : 1)
        for index in 0..<max(left.count, right.count) {
            let x = index < left.count ? left[index] : 0
            let y = index < right.count ? right[index] : 0
            difference |= x ^ y
        }
        return difference == 0
    }

    /// 32 random bytes (the system's generator: getrandom) as 64 hex digits.
    public static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for _ in 0..<4 {
            var word = generator.next()
            for _ in 0..<16 {
                out.append(digits[Int(word & 15)])
                word >>= 4
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
