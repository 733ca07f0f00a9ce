import Bluetooth

/// A well-known measured quantity: its reading name, unit and device class, defined once so
/// every parser publishes `temperature` in `°C` with class `temperature`.
public struct Quantity: Sendable, Hashable {
    public let name: String
    public let unit: String?
    public let deviceClass: DeviceClass?

    public init(name: String, unit: String?, deviceClass: DeviceClass?) {
        self.name = name
        self.unit = unit
        self.deviceClass = deviceClass
    }

    /// The same quantity under another name (e.g. `temperature_2`, `humidity_probe_1`).
    public func named(_ name: String) -> Quantity { Quantity(name: name, unit: unit, deviceClass: deviceClass) }

    public static let temperature = Self(name: "temperature", unit: "°C", deviceClass: .temperature)
    public static let humidity = Self(name: "humidity", unit: "%", deviceClass: .humidity)
    public static let battery = Self(name: "battery", unit: "%", deviceClass: .battery)
    public static let voltage = Self(name: "voltage", unit: "V", deviceClass: .voltage)
    public static let current = Self(name: "current", unit: "A", deviceClass: .current)
    public static let power = Self(name: "power", unit: "W", deviceClass: .power)
    public static let energy = Self(name: "energy", unit: "kWh", deviceClass: .energy)
    public static let pressure = Self(name: "pressure", unit: "hPa", deviceClass: .atmosphericPressure)
    public static let illuminance = Self(name: "illuminance", unit: "lx", deviceClass: .illuminance)
    public static let co2 = Self(name: "co2", unit: "ppm", deviceClass: .carbonDioxide)
    public static let pm25 = Self(name: "pm25", unit: "µg/m³", deviceClass: .pm25)
    public static let pm10 = Self(name: "pm10", unit: "µg/m³", deviceClass: .pm10)
    public static let voc = Self(name: "voc", unit: "µg/m³", deviceClass: .volatileOrganicCompounds)
    public static let moisture = Self(name: "moisture", unit: "%", deviceClass: .moisture)
    public static let conductivity = Self(name: "conductivity", unit: "µS/cm", deviceClass: .conductivity)
    public static let weight = Self(name: "weight", unit: "kg", deviceClass: .weight)
    public static let heartRate = Self(name: "heart_rate", unit: "bpm", deviceClass: nil)
    public static let dewPoint = Self(name: "dew_point", unit: "°C", deviceClass: .temperature)
    public static let accelerationX = Self(name: "acceleration_x", unit: "g", deviceClass: nil)
    public static let accelerationY = Self(name: "acceleration_y", unit: "g", deviceClass: nil)
    public static let accelerationZ = Self(name: "acceleration_z", unit: "g", deviceClass: nil)
    public static let txPower = Self(name: "tx_power", unit: "dBm", deviceClass: .signalStrength)
    public static let rssi = Self(name: "rssi", unit: "dBm", deviceClass: .signalStrength)
    public static let elevation = Self(name: "elevation", unit: "m", deviceClass: .distance)
    public static let formaldehyde = Self(name: "formaldehyde", unit: "mg/m³", deviceClass: nil)
}
