extension FixedWidthInteger {
    /// `value` rounded toward zero like `Self(value)`, but a value beyond the type's range gives
    /// its nearest bound and NaN gives 0, where `Self(value)` would stop the process. For
    /// numbers from outside (JSON, D-Bus, the command line) and values scaled from them, such
    /// as a duration in seconds times 1000.
    @inlinable
    public init<Source: BinaryFloatingPoint>(saturating value: Source) {
        if let exact = Self(exactly: value.rounded(.towardZero)) {
            self = exact
        } else if value.isNaN {
            self = 0
        } else {
            self = value < 0 ? .min : .max
        }
    }
}
