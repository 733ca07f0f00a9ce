import Bluetooth

/// A well-known measured quantity: its reading name, unit and device class, defined once so
/// every parser publishes `temperature` in `°C` with class `temperature`.
public struct Quantity: Sendable, Hashable {
    public let name: String
    public let unit: ReadingUnit?
    public let deviceClass: DeviceClass?

    public init(name: String, unit: ReadingUnit?, deviceClass: DeviceClass?) {
        self.name = name
        self.unit = unit
        self.deviceClass = deviceClass
    }

    /// The same quantity under another name (e.g. `temperature_2`, `humidity_probe_1`).
    public func named(_ name: String) -> Quantity { Quantity(name: name, unit: unit, deviceClass: deviceClass) }

    public static let temperature = Self(name: "temperature", unit: .celsius, deviceClass: .temperature)
    public static let humidity = Self(name: "humidity", unit: .percent, deviceClass: .humidity)
    public static let battery = Self(name: "battery", unit: .percent, deviceClass: .battery)
    public static let voltage = Self(name: "voltage", unit: .volts, deviceClass: .voltage)
    public static let current = Self(name: "current", unit: .amperes, deviceClass: .current)
    public static let power = Self(name: "power", unit: .watts, deviceClass: .power)
    public static let energy = Self(name: "energy", unit: .kilowattHours, deviceClass: .energy)
    public static let pressure = Self(name: "pressure", unit: .hectopascals, deviceClass: .atmosphericPressure)
    public static let illuminance = Self(name: "illuminance", unit: .lux, deviceClass: .illuminance)
    public static let co2 = Self(name: "co2", unit: .ppm, deviceClass: .carbonDioxide)
    public static let pm25 = Self(name: "pm25", unit: .microgramsPerCubicMetre, deviceClass: .pm25)
    public static let pm10 = Self(name: "pm10", unit: .microgramsPerCubicMetre, deviceClass: .pm10)
    public static let voc = Self(name: "voc", unit: .microgramsPerCubicMetre, deviceClass: .volatileOrganicCompounds)
    public static let moisture = Self(name: "moisture", unit: .percent, deviceClass: .moisture)
    public static let conductivity = Self(
        name: "conductivity", unit: .microsiemensPerCentimetre, deviceClass: .conductivity)
    public static let weight = Self(name: "weight", unit: .kilograms, deviceClass: .weight)
    public static let heartRate = Self(name: "heart_rate", unit: .bpm, deviceClass: nil)
    public static let dewPoint = Self(name: "dew_point", unit: .celsius, deviceClass: .temperature)
    public static let accelerationX = Self(name: "acceleration_x", unit: .grams, deviceClass: nil)
    public static let accelerationY = Self(name: "acceleration_y", unit: .grams, deviceClass: nil)
    public static let accelerationZ = Self(name: "acceleration_z", unit: .grams, deviceClass: nil)
    public static let txPower = Self(name: "tx_power", unit: .dBm, deviceClass: .signalStrength)
    public static let rssi = Self(name: "rssi", unit: .dBm, deviceClass: .signalStrength)
    public static let elevation = Self(name: "elevation", unit: .metres, deviceClass: .distance)
    public static let formaldehyde = Self(name: "formaldehyde", unit: .milligramsPerCubicMetre, deviceClass: nil)
}
