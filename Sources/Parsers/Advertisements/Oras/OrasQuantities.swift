import Bluetooth

extension Quantity {
    /// Length of a shower session in s.
    public static let showerDuration = Self(name: "duration", unit: .seconds, deviceClass: .duration)
    /// Water used in a shower session in L.
    public static let showerWater = Self(name: "water", unit: .litres, deviceClass: .water)
}
