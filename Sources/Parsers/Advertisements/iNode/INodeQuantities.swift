import Bluetooth

extension Quantity {
    /// Average electrical power in kW (the iNode meter's own unit).
    public static let iNodePower = Self(name: "power", unit: .kilowatts, deviceClass: .power)
    /// Average water/gas flow in m³/h.
    public static let iNodeFlowRate = Self(
        name: "volume_flow_rate", unit: .cubicMetresPerHour, deviceClass: .volumeFlowRate)
    /// Metered water/gas volume in m³.
    public static let iNodeWater = Self(name: "water", unit: .cubicMetres, deviceClass: .water)
}
