/// A sequence of retry delays that grows exponentially with jitter: the one backoff rule of the
/// project (MQTT reconnects, BLE reconnects, discovery retries build on it).
///
/// After the n-th consecutive failure the delay is `min(maximum, base · multiplierⁿ⁻¹)` spread by
/// ±`jitter`, where `base` is drawn once from ``Configuration/first`` after a reset. The spread
/// does not compound: every delay stays within `jitter` of its exponential base, so two
/// gateways that lose the same broker drift apart without either one's delays running away.
/// The first delay is not spread when `first` is a real range (the range already spreads it).
///
/// Pure: the caller passes one random number in 0..<1 per step, so sequences are tested
/// exactly without sleeping.
public struct ExponentialBackoff: Sendable, Hashable {
    public struct Configuration: Sendable, Hashable {
        /// Where the first delay lies, in seconds (a single value for a fixed first delay).
        public var first: ClosedRange<Double>
        /// Growth factor per consecutive failure (≥ 1).
        public var multiplier: Double
        /// No delay is longer than this, in seconds.
        public var maximum: Double
        /// Fraction of each delay added or removed at random, 0…1.
        public var jitter: Double

        public init(first: ClosedRange<Double>, multiplier: Double = 2, maximum: Double, jitter: Double = 0.2) {
            self.first = first
            self.multiplier = multiplier
            self.maximum = maximum
            self.jitter = jitter
        }

        /// Whether the numbers make sense: 0 < first, first ≤ maximum, multiplier ≥ 1, jitter in 0…1.
        public var isValid: Bool {
            first.lowerBound > 0 && first.upperBound <= maximum && multiplier >= 1 && (0...1).contains(jitter)
        }
    }

    public let configuration: Configuration
    /// Consecutive failures since the last ``reset()``.
    public private(set) var failures = 0
    private var base: Double = 0

    public init(_ configuration: Configuration) {
        self.configuration = configuration
    }

    /// Records a failure and returns the delay before the next attempt, in seconds.
    /// - Parameter random: a number in 0..<1 (a fresh random number in production).
    public mutating func next(random: Double) -> Double {
        let r = min(max(random, 0), 1)
        failures += 1
        let first = configuration.first
        if failures == 1 {
            base = first.lowerBound + (first.upperBound - first.lowerBound) * r
            if first.upperBound > first.lowerBound { return min(base, configuration.maximum) }
        }
        var delay = base
        var step = 1
        while step < failures && delay < configuration.maximum {
            delay *= configuration.multiplier
            step += 1
        }
        delay = min(delay, configuration.maximum)
        return min(configuration.maximum, delay * (1 + configuration.jitter * (2 * r - 1)))
    }

    /// A success: the next failure starts the sequence again.
    public mutating func reset() {
        failures = 0
        base = 0
    }
}
