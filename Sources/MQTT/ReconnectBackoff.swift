/// The reconnect delay sequence of an ``MQTTReconnectPolicy`` as a pure state machine: no clock,
/// no timers, randomness injected, so the sequence is unit-tested without sleeping.
public struct ReconnectBackoff: Sendable {
    public let policy: MQTTReconnectPolicy
    /// Consecutive failures since the last success.
    public private(set) var failures = 0

    public init(policy: MQTTReconnectPolicy) { self.policy = policy }

    /// Records a failed attempt and returns the delay before the next one, in seconds.
    /// - Parameter random: a value in 0..<1 (a fresh random number in production).
    public mutating func nextDelay(random: Double) -> Double {
        failures += 1
        let exponent = Double(min(failures - 1, 64))
        var base = policy.minimumDelay
        for _ in 0..<Int(exponent) where base < policy.maximumDelay { base *= policy.multiplier }
        base = min(base, policy.maximumDelay)
        let spread = base * policy.jitter * (2 * random - 1)
        return max(policy.minimumDelay * (1 - policy.jitter), base + spread)
    }

    /// Records a successful connection: the next failure waits the minimum delay again.
    public mutating func reset() { failures = 0 }
}
