/// A fixed delay for every retryable failure; gives up on `operationNotSupported`.
public struct FixedReconnectDelay: ReconnectStrategy {
    public var delay: Double
    public init(delay: Double) { self.delay = delay }
    public mutating func connected(at now: Double) {}
    public mutating func failed(_ error: BLEPortError, at now: Double) -> Double? {
        error.kind == .operationNotSupported ? nil : delay
    }
    public mutating func reset() {}
}
