/// Where the gateway's log lines go: a sink for `(level, message)`, with levels that are the
/// syslog priorities, a `<N>`-prefixed stderr-style formatter (``syslog(minimum:write:)``) and
/// redaction of secrets (``redacting(_:)``; ``Gateway`` always redacts ``GatewayConfig/secrets``).
public struct GatewayLogger: Sendable {
    /// A syslog priority (RFC 5424 severity): the number in the `<N>` prefix journald reads.
    public enum Level: Int, Sendable, Comparable, CaseIterable {
        case error = 3, warning = 4, notice = 5, info = 6, debug = 7
        public static func < (lhs: Level, rhs: Level) -> Bool { lhs.rawValue < rhs.rawValue }

        /// `--log-level` names: error (err), warning (warn), notice, info, debug.
        public init?(name: String) {
            switch name.lowercased() {
            case "error", "err": self = .error
            case "warning", "warn": self = .warning
            case "notice": self = .notice
            case "info": self = .info
            case "debug": self = .debug
            default: return nil
            }
        }
    }

    private let sink: @Sendable (Level, String) -> Void
    private let minimum: Level

    public init(minimum: Level = .debug, _ sink: @escaping @Sendable (Level, String) -> Void) {
        self.sink = sink
        self.minimum = minimum
    }

    /// Discards everything.
    public static let none = GatewayLogger(minimum: .error) { _, _ in }

    /// Lines for stderr under systemd: `<N>` + message, one prefix per line of a multi-line
    /// message; levels below `minimum` are dropped before the message is built.
    public static func syslog(minimum: Level, write: @escaping @Sendable (String) -> Void) -> GatewayLogger {
        GatewayLogger(minimum: minimum) { level, message in write(syslogLines(level, message)) }
    }

    /// `<N>text\n` per line of `message`.
    public static func syslogLines(_ level: Level, _ message: String) -> String {
        var text = ""
        for line in message.split(separator: "\n", omittingEmptySubsequences: false) {
            text += "<\(level.rawValue)>" + line + "\n"
        }
        return text
    }

    /// This logger with every occurrence of each secret replaced by `***` (empty and very short
    /// secrets are ignored, so they cannot blank out ordinary text).
    public func redacting(_ secrets: [String]) -> GatewayLogger {
        let secrets = secrets.filter { $0.count >= 3 }.sorted { $0.count > $1.count }
        guard !secrets.isEmpty else { return self }
        let sink = self.sink
        return GatewayLogger(minimum: minimum) { level, message in
            sink(level, Self.redact(message, secrets))
        }
    }

    static func redact(_ message: String, _ secrets: [String]) -> String {
        var text = message
        for secret in secrets where text.contains(secret) { text = text.replacing(secret, with: "***") }
        return text
    }

    /// Whether lines at `level` are kept.
    public func isEnabled(_ level: Level) -> Bool { level <= minimum }

    public func callAsFunction(_ level: Level, _ message: @autoclosure () -> String) {
        guard level <= minimum else { return }
        sink(level, message())
    }
}
