import Bluetooth

/// The value of one reading: what a JSON value in an MQTT payload can be.
public enum ReadingValue: Sendable, Hashable {
    case number(Double)
    case bool(Bool)
    case string(String)
    /// "Unknown" / "not available" as the format defines it (e.g. Temperature 0x8000).
    case null
    /// A short list of numbers (e.g. heart-rate RR intervals).
    case numbers([Double])

    /// The number, when this is one.
    public var number: Double? {
        if case .number(let value) = self { return value }
        return nil
    }
}

/// One named reading, e.g. `temperature = 21.53 °C`, with the Home Assistant device class it
/// should be published under.
///
/// Names and units follow Zigbee2MQTT / Home Assistant usage (`temperature` °C, `humidity` %,
/// `battery` %, `voltage` V, …); docs/parsers.md lists them. The unit and the device class are
/// kept as codes (``ReadingUnit``, ``DeviceClass``), so that copying a reading copies one string.
public struct Reading: Sendable, Hashable {
    /// The key in the published JSON, e.g. `temperature`, `humidity_2`.
    public var name: String
    public var value: ReadingValue
    /// The unit of measurement, nil for none.
    public var unitCode: ReadingUnit?
    /// The Home Assistant device class, nil for none.
    public var deviceClass: DeviceClass?

    /// The unit of measurement as Home Assistant spells it (`°C`, `%`, `hPa`), nil for none.
    public var unit: String? {
        get { unitCode?.symbol }
        set { unitCode = newValue.map { ReadingUnit($0) } }
    }

    @inline(__always)
    public init(name: String, value: ReadingValue, unit: ReadingUnit? = nil, deviceClass: DeviceClass? = nil) {
        self.name = name
        self.value = value
        self.unitCode = unit
        self.deviceClass = deviceClass
    }

    /// A reading of a well-known quantity, taking its name, unit and device class.
    @inline(__always)
    public init(_ quantity: Quantity, _ value: Double) {
        self.init(name: quantity.name, value: .number(value), unit: quantity.unit, deviceClass: quantity.deviceClass)
    }

    /// A reading of a well-known quantity that may be unknown (`null`).
    @inline(__always)
    public init(_ quantity: Quantity, _ value: Double?) {
        self.init(
            name: quantity.name, value: value.map { .number($0) } ?? .null, unit: quantity.unit,
            deviceClass: quantity.deviceClass)
    }

    /// A number without unit or class.
    @inline(__always)
    public init(_ name: String, _ value: Double, unit: ReadingUnit? = nil) {
        self.init(name: name, value: .number(value), unit: unit)
    }

    /// A string reading.
    @inline(__always)
    public init(_ name: String, string: String) {
        self.init(name: name, value: .string(string))
    }

    /// A binary-sensor reading.
    @inline(__always)
    public init(_ name: String, bool: Bool, deviceClass: DeviceClass? = nil) {
        self.init(name: name, value: .bool(bool), deviceClass: deviceClass)
    }
}

/// A Home Assistant device class (sensor or binary sensor), e.g. `temperature`, `battery`: a code
/// for a text in a process-wide table (``InternedTexts``).
public struct DeviceClass: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    @usableFromInline let code: UInt16
    public init(rawValue: String) { code = InternedTexts.deviceClasses.code(rawValue) }
    public var rawValue: String { InternedTexts.deviceClasses.text(code) }
    public var description: String { rawValue }

    public static let temperature = Self(rawValue: "temperature")
    public static let humidity = Self(rawValue: "humidity")
    public static let battery = Self(rawValue: "battery")
    public static let voltage = Self(rawValue: "voltage")
    public static let current = Self(rawValue: "current")
    public static let power = Self(rawValue: "power")
    public static let energy = Self(rawValue: "energy")
    public static let pressure = Self(rawValue: "pressure")
    public static let atmosphericPressure = Self(rawValue: "atmospheric_pressure")
    public static let illuminance = Self(rawValue: "illuminance")
    public static let carbonDioxide = Self(rawValue: "carbon_dioxide")
    public static let pm25 = Self(rawValue: "pm25")
    public static let pm10 = Self(rawValue: "pm10")
    public static let pm1 = Self(rawValue: "pm1")
    public static let volatileOrganicCompounds = Self(rawValue: "volatile_organic_compounds")
    public static let moisture = Self(rawValue: "moisture")
    public static let conductivity = Self(rawValue: "conductivity")
    public static let weight = Self(rawValue: "weight")
    public static let distance = Self(rawValue: "distance")
    public static let duration = Self(rawValue: "duration")
    public static let speed = Self(rawValue: "speed")
    public static let gas = Self(rawValue: "gas")
    public static let volume = Self(rawValue: "volume")
    public static let volumeStorage = Self(rawValue: "volume_storage")
    public static let volumeFlowRate = Self(rawValue: "volume_flow_rate")
    public static let water = Self(rawValue: "water")
    public static let precipitation = Self(rawValue: "precipitation")
    public static let signalStrength = Self(rawValue: "signal_strength")
    public static let timestamp = Self(rawValue: "timestamp")
    public static let windDirection = Self(rawValue: "wind_direction")
    // Binary sensors
    public static let motion = Self(rawValue: "motion")
    public static let occupancy = Self(rawValue: "occupancy")
    public static let opening = Self(rawValue: "opening")
    public static let door = Self(rawValue: "door")
    public static let window = Self(rawValue: "window")
    public static let light = Self(rawValue: "light")
    public static let smoke = Self(rawValue: "smoke")
    public static let lock = Self(rawValue: "lock")
    public static let problem = Self(rawValue: "problem")
    public static let presence = Self(rawValue: "presence")
    public static let batteryCharging = Self(rawValue: "battery_charging")
}

extension Array where Element == Reading {
    /// An empty list with room for an advertisement's usual readings, so that appending them
    /// allocates once instead of growing the buffer two or three times.
    @inline(__always)
    static func reserved(_ capacity: Int = 8) -> [Reading] {
        var readings: [Reading] = []
        readings.reserveCapacity(capacity)
        return readings
    }
}
