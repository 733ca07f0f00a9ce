/// Where the gateway's log lines go; the composition root maps levels to syslog priorities.
public struct GatewayLogger: Sendable {
    public enum Level: Int, Sendable, Comparable {
        case error = 3, warning = 4, notice = 5, info = 6, debug = 7
        public static func < (lhs: Level, rhs: Level) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    private let sink: @Sendable (Level, String) -> Void

    public init(_ sink: @escaping @Sendable (Level, String) -> Void) { self.sink = sink }

    /// Discards everything.
    public static let none = GatewayLogger { _, _ in }

    public func callAsFunction(_ level: Level, _ message: @autoclosure () -> String) {
        sink(level, message())
    }
}
