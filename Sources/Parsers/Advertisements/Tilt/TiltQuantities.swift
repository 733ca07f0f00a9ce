import Bluetooth

extension Quantity {
    /// Specific gravity of a liquid (density relative to water), e.g. 1.016 for wort.
    public static let specificGravity = Self(name: "specific_gravity", unit: nil, deviceClass: nil)
}
