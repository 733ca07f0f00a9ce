/// The parameters of an LE connection a central asks for (Core spec, Vol 4 Part E, LE Create
/// Connection and LE Connection Update), in the units of the air interface: the connection interval
/// in 1.25 ms steps, the peripheral latency in connection events, the supervision timeout in 10 ms
/// steps. One type for the ESPHome API's BluetoothSetConnectionParamsRequest, a device rule's
/// `connection_params` and the kernel's Load Connection Parameters.
public struct ConnectionParameters: Sendable, Equatable, Hashable, CustomStringConvertible {
    public var minInterval: UInt16
    public var maxInterval: UInt16
    public var latency: UInt16
    public var supervisionTimeout: UInt16

    public init(minInterval: UInt16, maxInterval: UInt16, latency: UInt16, supervisionTimeout: UInt16) {
        self.minInterval = minInterval
        self.maxInterval = maxInterval
        self.latency = latency
        self.supervisionTimeout = supervisionTimeout
    }

    /// The Core spec's ranges: interval 0x0006–0x0C80 (7.5 ms–4 s), latency 0–499 (0x01F3),
    /// supervision timeout 0x000A–0x0C80 (100 ms–32 s).
    public static let intervalRange: ClosedRange<UInt16> = 0x0006...0x0C80
    public static let maxLatency: UInt16 = 0x01F3
    public static let timeoutRange: ClosedRange<UInt16> = 0x000A...0x0C80

    /// What is wrong with the parameters, naming the field (`names` maps the four fields to the
    /// caller's words), or nil when the Core spec allows them: each in its range, min ≤ max, and
    /// the supervision timeout longer than (1 + latency) · max interval · 2.
    public func problem(names: Names = .api) -> String? {
        func interval(_ value: UInt16) -> String { Self.millisecondsText(hundredths: Int(value) * 125) }
        let range = "\(interval(Self.intervalRange.lowerBound))–\(interval(Self.intervalRange.upperBound)) ms"
        if !Self.intervalRange.contains(minInterval) {
            return "\(names.minInterval) \(names.interval(minInterval)) is outside \(names.intervalRange(range))"
        }
        if !Self.intervalRange.contains(maxInterval) {
            return "\(names.maxInterval) \(names.interval(maxInterval)) is outside \(names.intervalRange(range))"
        }
        if minInterval > maxInterval {
            return
                "\(names.minInterval) \(names.interval(minInterval)) is more than \(names.maxInterval) \(names.interval(maxInterval))"
        }
        if latency > Self.maxLatency { return "\(names.latency) \(latency) is outside 0–\(Self.maxLatency)" }
        if !Self.timeoutRange.contains(supervisionTimeout) {
            return
                "\(names.supervisionTimeout) \(names.timeout(supervisionTimeout)) is outside \(names.timeoutRange)"
        }
        // Timeout (10 ms units) · 10 > (1 + latency) · max interval (1.25 ms units) · 1.25 · 2,
        // in whole numbers: timeout · 4 > (1 + latency) · max interval.
        if UInt32(supervisionTimeout) * 4 <= (1 + UInt32(latency)) * UInt32(maxInterval) {
            let least = Self.millisecondsText(hundredths: (1 + Int(latency)) * Int(maxInterval) * 250)
            return
                "\(names.supervisionTimeout) \(names.timeout(supervisionTimeout)) must be longer than (1 + \(names.latency)) × \(names.maxInterval) × 2 = \(least) ms"
        }
        return nil
    }

    /// How ``problem(names:)`` names the fields and shows their values.
    public struct Names: Sendable {
        public var minInterval: String
        public var maxInterval: String
        public var latency: String
        public var supervisionTimeout: String
        /// Values in the units of the wire (1.25 ms, 10 ms), or in milliseconds.
        public var inMilliseconds: Bool

        /// The names of BluetoothSetConnectionParamsRequest, values in the units of the wire.
        public static let api = Names(
            minInterval: "min_interval", maxInterval: "max_interval", latency: "latency",
            supervisionTimeout: "timeout", inMilliseconds: false)
        /// The names of a device rule's `connection_params`, values in milliseconds.
        public static let config = Names(
            minInterval: "min_interval_ms", maxInterval: "max_interval_ms", latency: "latency",
            supervisionTimeout: "supervision_timeout_ms", inMilliseconds: true)

        func interval(_ value: UInt16) -> String {
            inMilliseconds ? "\(ConnectionParameters.millisecondsText(hundredths: Int(value) * 125)) ms" : "\(value)"
        }
        func timeout(_ value: UInt16) -> String {
            inMilliseconds ? "\(Int(value) * 10) ms" : "\(value)"
        }
        func intervalRange(_ milliseconds: String) -> String {
            inMilliseconds ? milliseconds : "6–3200 (units of 1.25 ms: \(milliseconds))"
        }
        var timeoutRange: String { inMilliseconds ? "100–32000 ms" : "10–3200 (units of 10 ms: 100–32000 ms)" }
    }

    /// "7.5 ms, 15 ms … latency 0, timeout 4000 ms": for logs and `bridge/devices`.
    public var description: String {
        let low = Self.millisecondsText(hundredths: Int(minInterval) * 125)
        let high = Self.millisecondsText(hundredths: Int(maxInterval) * 125)
        return "interval \(low)–\(high) ms, latency \(latency), supervision timeout \(Int(supervisionTimeout) * 10) ms"
    }

    /// Hundredths of a millisecond as milliseconds with at most two decimals and no trailing
    /// zeros ("7.5", "15", "1.25"); whole numbers, so exact (the wire's units are 1.25 ms and 10 ms).
    public static func millisecondsText(hundredths: Int) -> String {
        let whole = hundredths / 100
        let fraction = hundredths % 100
        if fraction == 0 { return "\(whole)" }
        if fraction % 10 == 0 { return "\(whole).\(fraction / 10)" }
        return "\(whole).\(fraction < 10 ? "0" : "")\(fraction)"
    }
}
