import Bluetooth

extension Quantity {
    /// Weight in g (kitchen and coffee scales).
    public static let weightGrams = Self(name: "weight", unit: .grams, deviceClass: .weight)
}
