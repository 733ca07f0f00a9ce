import JSON

/// Zigbee2MQTT-style `linkquality` (0–255) from an RSSI in dBm: linear from -100 dBm (0) to
/// -30 dBm (255), clamped. So -60 dBm → 146, -70 dBm → 109, -90 dBm → 36. Documented in docs/config.md.
public enum LinkQuality {
    public static func from(rssi: Int) -> Int {
        let scaled = (Double(rssi) + 100) * 255 / 70
        return Int(saturating: min(255, max(0, scaled.rounded())))
    }
}
