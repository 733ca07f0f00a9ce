/// Quantities of the Ruuvi Air formats (6 and E1).
extension Quantity {
    public static let pm1 = Self(name: "pm1", unit: .microgramsPerCubicMetre, deviceClass: .pm1)
    public static let pm4 = Self(name: "pm4", unit: .microgramsPerCubicMetre, deviceClass: nil)
    /// Sensirion SGP4x VOC index (1…500, 100 = the sensor's running average).
    public static let vocIndex = Self(name: "voc_index", unit: nil, deviceClass: nil)
    /// Sensirion SGP4x NOx index (1…500, 1 = the sensor's running average).
    public static let noxIndex = Self(name: "nox_index", unit: nil, deviceClass: nil)
    /// Ruuvi's indoor air quality score, 0…100, from CO₂ and PM2.5.
    public static let airQualityScore = Self(name: "air_quality_score", unit: nil, deviceClass: nil)
    public static let soundLevel = Self(name: "sound_level", unit: .dBA, deviceClass: nil)
}

/// Ruuvi's indoor air quality score (IAQS, docs.ruuvi.com "Ruuvi Indoor Air Quality Score"):
/// 100 minus the distance of (PM2.5 on 0…60 µg/m³, CO₂ on 420…2300 ppm), each scaled to 0…100
/// and clamped to its range, rounded, within 0…100. Nil when either input is n/a.
func ruuviAirQualityScore(co2: Double?, pm25: Double?) -> Double? {
    guard let co2, let pm25 else { return nil }
    let dx = (min(max(pm25, 0), 60) - 0) * (100.0 / 60)
    let dy = (min(max(co2, 420), 2300) - 420) * (100.0 / 1880)
    let value = 100 - (dx * dx + dy * dy).squareRoot()
    return min(100, max(0, value.rounded()))
}

/// A 9-bit Sensirion index: eight high bits in a byte, the lowest in a flag bit; 511 is n/a.
func ruuviIndex(_ high: UInt8, flags: UInt8, bit: UInt8) -> Double? {
    let value = Int(high) << 1 | (flags & (1 << bit) == 0 ? 0 : 1)
    return value == 0x1FF ? nil : Double(value)
}
