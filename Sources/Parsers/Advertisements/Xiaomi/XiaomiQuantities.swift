/// Quantities of the Xiaomi formats (MiBeacon objects, Mi scales) that no other format uses
/// yet; names follow xiaomi-ble's sensor keys.
extension Quantity {
    /// Filter / consumable life left (MiBeacon 0x1013).
    public static let consumable = Self(name: "consumable", unit: .percent, deviceClass: nil)
    /// Seat/pressure sensor: seconds the pressure has been present / absent (0x483D, 0x483E).
    public static let pressurePresentDuration = Self(
        name: "pressure_present_duration", unit: .seconds, deviceClass: .duration)
    public static let pressureNotPresentDuration = Self(
        name: "pressure_not_present_duration", unit: .seconds, deviceClass: .duration)
    /// Presence sensor settings: minutes until "detected" / "cleared" is reported (0x4851, 0x4852).
    public static let durationDetected = Self(name: "duration_detected", unit: .minutes, deviceClass: .duration)
    public static let durationCleared = Self(name: "duration_cleared", unit: .minutes, deviceClass: .duration)
    /// Body impedance of a body-composition scale.
    public static let impedance = Self(name: "impedance", unit: .ohms, deviceClass: nil)
    public static let impedanceLow = Self(name: "impedance_low", unit: .ohms, deviceClass: nil)
    public static let impedanceHigh = Self(name: "impedance_high", unit: .ohms, deviceClass: nil)
}
