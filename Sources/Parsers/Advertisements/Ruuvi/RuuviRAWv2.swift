import Bluetooth

/// Ruuvi data format 5 "RAWv2" (ruuvi-sensor-protocols `dataformat_05.md`), manufacturer id
/// 0x0499, 24 bytes, big-endian. Every field has an n/a value that decodes to `null`.
/// Acceleration is published in g (all three axes null when any is n/a), pressure in hPa.
public struct RuuviRAWv2: AdvertisementParser {
    public init() {}
    public var format: String { "ruuvi_rawv2" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x0499)] }
    /// The measurement sequence (nil when the tag says it is not available).
    public func frameCounter(_ payload: [UInt8], readings: [Reading]) -> UInt32? {
        readings.frameCounter(named: "measurement_sequence")
    }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.first == 5 else { return nil }
        guard payload.count >= 24 else { throw .tooShort("Ruuvi RAWv2", need: 24, got: payload.count) }
        var reader = ByteReader(payload, from: 1, what: "Ruuvi RAWv2")
        let temperature = try reader.s16be()
        let humidity = try reader.u16be()
        let pressure = try reader.u16be()
        let ax = try reader.s16be(), ay = try reader.s16be(), az = try reader.s16be()
        let power = try reader.u16be()
        let movement = try reader.u8()
        let sequence = try reader.u16be()
        let macBytes = try reader.bytes(6)
        // The three axes form one vector: if any axis is n/a, none is published.
        let vectorValid = ax != Int16.min && ay != Int16.min && az != Int16.min
        func acceleration(_ raw: Int16) -> Double? { vectorValid ? decimal(raw, 3) : nil }
        let millivolts = Int(power >> 5), txCode = Int(power & 0x1F)
        return [
            Reading(.temperature, temperature == Int16.min ? nil : decimal(Int(temperature) * 5, 3)),
            Reading(.humidity, humidity == 0xFFFF ? nil : decimal(Int(humidity) * 25, 4)),
            Reading(.pressure, pressure == 0xFFFF ? nil : decimal(Int(pressure) + 50000, 2)),
            Reading(.accelerationX, acceleration(ax)),
            Reading(.accelerationY, acceleration(ay)),
            Reading(.accelerationZ, acceleration(az)),
            Reading(.voltage, millivolts == 2047 ? nil : decimal(millivolts + 1600, 3)),
            Reading(.txPower, txCode == 31 ? nil : Double(-40 + 2 * txCode)),
            Reading(name: "movement_counter", value: movement == 0xFF ? .null : .number(Double(movement))),
            Reading(name: "measurement_sequence", value: sequence == 0xFFFF ? .null : .number(Double(sequence))),
            Reading(
                name: "mac",
                value: macBytes.allSatisfy { $0 == 0xFF }
                    ? .null
                    : .string(BluetoothAddress(octets: macBytes)?.description ?? "")),
        ]
    }
}
