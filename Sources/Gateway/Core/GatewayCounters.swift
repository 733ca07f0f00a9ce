/// Running totals of what the gateway did (for `bridge/health` and logs).
public struct GatewayCounters: Sendable, Equatable {
    public var advertisements = 0
    public var notifications = 0
    public var reads = 0
    public var published = 0
    /// Payloads a parser rejected (each also logged).
    public var parseErrors = 0
    public var commands = 0
    public var commandErrors = 0
    public var connects = 0
    public var connectFailures = 0
    public var disconnects = 0

    public init() {}
}
