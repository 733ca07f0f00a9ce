/// When to try connecting again after a connection attempt failed or a link dropped: the
/// reconnect rule of docs/architecture.md ("Links: errors and reconnects") as a pure state
/// machine over ``ExponentialBackoff``.
///
/// - After `connectionTimeout` or `peripheralDisconnected` the first retry comes after a random
///   delay in ``Configuration/firstDelay`` (1–5 s), each further one after twice the previous
///   base with ±``Configuration/jitter`` randomness, never more than ``Configuration/maximumDelay``
///   (60 s).
/// - `operationNotSupported` (and anything else marked permanent) is never retried.
/// - A connection that stayed up for ``Configuration/stableAfter`` seconds resets the backoff.
///
/// Time is passed in by the caller (monotonic seconds) and randomness comes from an injected
/// generator, so the policy is tested without sleeping and repeats exactly for a given seed.
public struct ReconnectPolicy<Random: RandomNumberGenerator & Sendable>: Sendable {
    public struct Configuration: Sendable, Equatable {
        /// Range of the first retry delay, in seconds.
        public var firstDelay: ClosedRange<Double> = 1...5
        /// Upper bound of every delay, in seconds.
        public var maximumDelay: Double = 60
        /// Growth factor between consecutive retries.
        public var multiplier: Double = 2
        /// Relative jitter applied to every delay after the first (0.2 = ±20 %).
        public var jitter: Double = 0.2
        /// A connection that lasted this long resets the backoff.
        public var stableAfter: Double = 30

        public init() {}

        var backoff: ExponentialBackoff.Configuration {
            ExponentialBackoff.Configuration(
                first: firstDelay, multiplier: multiplier, maximum: maximumDelay, jitter: jitter)
        }
    }

    /// Why the last attempt or connection ended.
    public enum Failure: Sendable, Equatable {
        /// Connecting did not complete in time (or BlueZ's "le-connection-abort-by-local").
        case connectionTimeout
        /// The link was up and dropped.
        case peripheralDisconnected
        /// The device or adapter cannot do what was asked; retrying would not help.
        case operationNotSupported
        /// Any other error, retryable or not.
        case other(retryable: Bool)

        var isRetryable: Bool {
            switch self {
            case .connectionTimeout, .peripheralDisconnected: true
            case .operationNotSupported: false
            case .other(let retryable): retryable
            }
        }
    }

    /// What the caller should do next.
    public enum Action: Sendable, Equatable {
        /// Connect again after this many seconds.
        case retry(after: Double)
        /// Stop trying; the failure is permanent.
        case giveUp
    }

    public let configuration: Configuration
    private var random: Random
    private var backoff: ExponentialBackoff
    private var connectedAt: Double?

    /// Retries since the last stable connection.
    public var attempt: Int { backoff.failures }

    public init(configuration: Configuration = Configuration(), random: Random) {
        self.configuration = configuration
        self.random = random
        backoff = ExponentialBackoff(configuration.backoff)
    }

    /// The device connected at `now`.
    public mutating func connected(at now: Double) {
        connectedAt = now
    }

    /// A connection attempt failed, or the link dropped, at `now`.
    public mutating func failed(_ failure: Failure, at now: Double) -> Action {
        if let since = connectedAt, now - since >= configuration.stableAfter { backoff.reset() }
        connectedAt = nil
        guard failure.isRetryable else { return .giveUp }
        return .retry(after: backoff.next(random: Double.random(in: 0..<1, using: &random)))
    }

    /// Forget the history (e.g. the user asked to connect now).
    public mutating func reset() {
        backoff.reset()
        connectedAt = nil
    }
}

extension ReconnectPolicy where Random == SystemRandomNumberGenerator {
    /// A policy drawing its jitter from the system generator.
    public init(configuration: Configuration = Configuration()) {
        self.init(configuration: configuration, random: SystemRandomNumberGenerator())
    }
}
