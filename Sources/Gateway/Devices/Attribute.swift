import Parsers

/// One attribute of a device's state, with the unit and Home Assistant device class of the
/// reading that produced it (for discovery).
struct Attribute: Sendable, Equatable {
    var name: String
    var value: ReadingValue
    var unit: String?
    var deviceClass: DeviceClass?
}
