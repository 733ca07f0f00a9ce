import Bluetooth

extension DeviceClass {
    /// Home Assistant binary sensor `plug` (on = plugged in).
    public static let plug = Self(rawValue: "plug")
}
