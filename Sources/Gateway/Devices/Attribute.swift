import Parsers

/// One attribute of a device's state, with the unit and Home Assistant device class of the
/// reading that produced it (for discovery).
struct Attribute: Sendable, Equatable {
    var name: String
    var value: ReadingValue
    /// The unit and device class, one shared object per distinct pair (``AttributeInfo/Table``):
    /// a reference instead of two optional strings in every attribute of every device.
    var info: AttributeInfo?

    var unit: String? { info?.unit }
    var deviceClass: DeviceClass? { info?.deviceClass }
}

/// The unit and Home Assistant device class of an attribute.
final class AttributeInfo: Sendable, Equatable {
    let unit: String?
    let deviceClass: DeviceClass?

    private init(unit: String?, deviceClass: DeviceClass?) {
        self.unit = unit
        self.deviceClass = deviceClass
    }

    static func == (lhs: AttributeInfo, rhs: AttributeInfo) -> Bool {
        lhs.unit == rhs.unit && lhs.deviceClass == rhs.deviceClass
    }

    /// One ``AttributeInfo`` per distinct pair (the parsers and the configured characteristics
    /// use a few dozen).
    struct Table: Sendable {
        private var infos: [Key: AttributeInfo] = [:]

        private struct Key: Hashable {
            let unit: String?
            let deviceClass: DeviceClass?
        }

        /// The shared info of the pair; nil when both are nil.
        mutating func info(unit: String?, deviceClass: DeviceClass?) -> AttributeInfo? {
            guard unit != nil || deviceClass != nil else { return nil }
            let key = Key(unit: unit, deviceClass: deviceClass)
            if let info = infos[key] { return info }
            let info = AttributeInfo(unit: unit, deviceClass: deviceClass)
            infos[key] = info
            return info
        }
    }
}
