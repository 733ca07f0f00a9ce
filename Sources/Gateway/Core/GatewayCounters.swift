/// Running totals of what the gateway did (for `bridge/health` and logs).
public struct GatewayCounters: Sendable, Equatable {
    public var advertisements = 0
    public var notifications = 0
    /// Advertisements and GATT values that decoded into readings.
    public var decoded = 0
    public var reads = 0
    public var published = 0
    /// Payloads a parser rejected (logged, at a bounded rate); encrypted advertisements without
    /// a key or with a wrong one count in ``DropCounters/keyMissing`` and
    /// ``DropCounters/keyWrong`` instead.
    public var parseErrors = 0
    public var commands = 0
    public var commandErrors = 0
    public var connects = 0
    public var connectFailures = 0
    public var disconnects = 0
    /// Successful connects after a link of the same device had been up before.
    public var reconnects = 0
    /// Devices removed on request or forgotten.
    public var devicesRemoved = 0
    public var dropped = DropCounters()

    public init() {}
}
