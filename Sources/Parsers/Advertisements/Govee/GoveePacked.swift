import Bluetooth

/// Govee's packed temperature/humidity value (govee-ble `decode_temp_humid`): bit 23 negative,
/// the rest `temperature × 10000 + humidity × 10` (°C and % with one decimal). Out-of-range
/// results (the sensor's error state) give `null`.
func goveePacked(_ raw: UInt32, into readings: inout [Reading]) {
    let negative = raw & 0x80_0000 != 0
    let value = Int(raw & 0x7F_FFFF)
    let temperature = Double(value / 1000) / 10 * (negative ? -1 : 1)
    let humidity = Double(value % 1000) / 10
    let valid = temperature >= -40 && temperature <= 100 && humidity <= 100
    readings.append(Reading(.temperature, valid ? temperature : nil))
    readings.append(Reading(.humidity, valid ? humidity : nil))
}

/// Govee battery byte: bit 7 is the sensor's error flag, the rest percent.
func goveeBattery(_ byte: UInt8, into readings: inout [Reading]) -> Bool {
    readings.append(Reading(.battery, Double(byte & 0x7F)))
    return byte & 0x80 != 0
}

extension AdvertisementContext {
    /// The local name, upper-cased, or "" (Govee models are told apart by name).
    var upperName: String { advertisement.localName?.uppercased() ?? "" }
}
