import Retry

/// The reconnect rule of docs/architecture.md (1–5 s, jittered doubling up to 60 s, reset after a stable
/// link, permanent failures never retried) is the gateway's default strategy.
extension ReconnectPolicy: ReconnectStrategy {
    public mutating func failed(_ error: BLEPortError, at now: Double) -> Double? {
        let failure: Failure
        switch error.kind {
        case .connectionTimeout: failure = .connectionTimeout
        case .peripheralDisconnected, .notConnected: failure = .peripheralDisconnected
        case .operationNotSupported: failure = .operationNotSupported
        case .notPermitted, .notFound, .invalidConfiguration: failure = .other(retryable: false)
        case .invalidValueLength, .unavailable, .other: failure = .other(retryable: true)
        }
        switch failed(failure, at: now) {
        case .retry(let delay): return delay
        case .giveUp: return nil
        }
    }
}
