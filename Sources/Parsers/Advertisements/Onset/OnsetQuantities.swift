import Bluetooth

extension Quantity {
    /// Water level above the sensor, in cm.
    public static let waterLevel = Self(name: "water_level", unit: .centimetres, deviceClass: .distance)
}
