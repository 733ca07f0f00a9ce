import Bluetooth

extension Quantity {
    /// Fill level of a tank in %.
    public static let tankLevel = Self(name: "level", unit: .percent, deviceClass: nil)
}
