import JSON

extension String {
    /// `value` with exactly one digit after the point (`%.1f`), for seconds in log lines.
    public init(oneDecimal value: Double) {
        let tenths = Int(saturating: (value * 10).rounded())
        self = "\(tenths < 0 ? "-" : "")\(abs(tenths) / 10).\(abs(tenths) % 10)"
    }
}
