import JSON
import Synchronization

/// The web server's counters, for `bridge/health` (`web`) and `/metrics`: written on the loop
/// thread by the server's handlers, read by the core's health report (also on the loop; the lock
/// keeps the type honest for any thread).
public final class WebCounters: Sendable {
    /// Why a request was refused (the `reason` label, the keys of `web.refused`).
    enum Reason: String, CaseIterable {
        /// No or a wrong token or session (401).
        case unauthorized
        /// A login with wrong credentials (401).
        case loginFailed = "login_failed"
        /// A POST without its CSRF token (403).
        case csrf
        /// A body beyond `web.max_body` (413).
        case tooLarge = "too_large"
        /// A malformed request target, query or form (400).
        case badRequest = "bad_request"
        /// More event streams than the server keeps (503).
        case eventStreamsFull = "event_streams_full"
        /// A connection beyond `web.max_connections`, closed at once (no answer).
        case connectionLimit = "connection_limit"
    }

    struct Figures: Sendable {
        var listening = false
        var requests = 0
        var refused: [Reason: Int] = [:]
        var eventClients = 0
        var eventClientsDropped = 0

        var refusedByReason: [(String, Int)] { Reason.allCases.map { ($0.rawValue, refused[$0] ?? 0) } }
    }

    private let figures = Mutex(Figures())

    public init() {}

    var snapshot: Figures { figures.withLock { $0 } }

    func update(_ body: (inout Figures) -> Void) { figures.withLock { body(&$0) } }

    func refused(_ reason: Reason) { figures.withLock { $0.refused[reason, default: 0] += 1 } }

    /// `bridge/health` `web`: `{"listening","requests","refused":{…},"event_clients","event_clients_dropped"}`.
    public var health: JSONValue {
        let figures = snapshot
        return .object([
            ("listening", .bool(figures.listening)),
            ("requests", .number(Double(figures.requests))),
            ("refused", .object(figures.refusedByReason.map { ($0.0, .number(Double($0.1))) })),
            ("event_clients", .number(Double(figures.eventClients))),
            ("event_clients_dropped", .number(Double(figures.eventClientsDropped))),
        ])
    }
}
