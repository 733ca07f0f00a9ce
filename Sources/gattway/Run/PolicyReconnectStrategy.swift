import BlueZ
import Gateway

/// The central's ``ReconnectPolicy`` (design.md §3: 1–5 s, then jittered doubling up to 60 s,
/// reset after a stable link, permanent errors never retried) as the gateway's strategy.
struct PolicyReconnectStrategy: ReconnectStrategy {
    var policy: ReconnectPolicy<SystemRandomNumberGenerator>

    init(configuration: ReconnectPolicy<SystemRandomNumberGenerator>.Configuration = .init()) {
        policy = ReconnectPolicy(configuration: configuration)
    }

    mutating func connected(at now: Double) {
        policy.connected(at: now)
    }

    mutating func failed(_ error: BLEPortError, at now: Double) -> Double? {
        let failure: ReconnectPolicy<SystemRandomNumberGenerator>.Failure
        switch error.kind {
        case .connectionTimeout: failure = .connectionTimeout
        case .peripheralDisconnected, .notConnected: failure = .peripheralDisconnected
        case .operationNotSupported: failure = .operationNotSupported
        case .notPermitted, .notFound: failure = .other(retryable: false)
        case .invalidValueLength, .unavailable, .other: failure = .other(retryable: true)
        }
        switch policy.failed(failure, at: now) {
        case .retry(let delay): return delay
        case .giveUp: return nil
        }
    }

    mutating func reset() {
        policy.reset()
    }
}
