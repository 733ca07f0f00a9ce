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

/// The little-endian layout of the H5074 family and the H5179 at `offset`: temperature int16
/// × 0.01 °C, humidity uint16 × 0.01 %, battery uint8 %.
func goveeLittleEndian(_ payload: [UInt8], from offset: Int, what: String) throws(ParseError) -> [Reading] {
    var reader = ByteReader(payload, from: offset, what: what)
    let temperature = try reader.s16le()
    let humidity = try reader.u16le()
    let battery = try reader.u8()
    return [
        Reading(.temperature, decimal(temperature, 2)), Reading(.humidity, decimal(humidity, 2)),
        Reading(.battery, Double(battery)),
    ]
}

/// Govee battery byte: bit 7 is the sensor's error flag, the rest percent.
func goveeBattery(_ byte: UInt8, into readings: inout [Reading]) -> Bool {
    readings.append(Reading(.battery, Double(byte & 0x7F)))
    return byte & 0x80 != 0
}

extension AdvertisementContext {
    /// True when the local name contains `needle` (ASCII, case-insensitive); Govee models are
    /// told apart by name. Scans UTF-8 bytes without allocating.
    func nameContains(_ needle: StaticString) -> Bool {
        guard let name = advertisement.localName else { return false }
        let pattern = UnsafeBufferPointer(start: needle.utf8Start, count: needle.utf8CodeUnitCount)
        func scan(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
            guard bytes.count >= pattern.count else { return false }
            outer: for start in 0...(bytes.count - pattern.count) {
                for offset in 0..<pattern.count where bytes[start + offset] | 0x20 != pattern[offset] | 0x20 {
                    continue outer
                }
                return true
            }
            return false
        }
        if let found = name.utf8.withContiguousStorageIfAvailable(scan) { return found }
        return Array(name.utf8).withUnsafeBufferPointer(scan)
    }
}

/// The length of a Govee manufacturer payload without the 25-byte iBeacon frame
/// (`4C 00 02 15` + "INTELLI_ROCKS…") some models glue onto its end (govee-ble strips it too).
func goveeLength(_ payload: [UInt8]) -> Int {
    let count = payload.count
    guard count > 25 else { return count }
    let tail = count - 25
    var reader = ByteReader(payload, from: tail)
    guard (try? reader.u32be()) == 0x4C00_0215 else { return count }
    return tail
}
