import Bluetooth

/// SmartDry laundry (dryer) sensor, manufacturer 0x01AE, 12 bytes little-endian: temperature
/// float32 °C, humidity float32 %, shake intensity uint16, battery byte (mV − 2847), status
/// byte (bit 0 = awake). Layout: Theengs decoder `devices/SmartDry_json.h`.
public struct SmartDryLaundry: AdvertisementParser {
    public init() {}
    public var format: String { "smartdry" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x01AE)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count == 12 else { return nil }
        var reader = ByteReader(payload, what: "SmartDry")
        let temperature = Float(bitPattern: try reader.u32le())
        let humidity = Float(bitPattern: try reader.u32le())
        let shake = try reader.u16le()
        let battery = try reader.u8()
        let status = try reader.u8()
        return [
            Reading(.temperature, temperature.isFinite ? rounded(Double(temperature), 2) : nil),
            Reading(.humidity, humidity.isFinite ? rounded(Double(humidity), 2) : nil),
            Reading("shake", Double(shake)),
            Reading(.voltage, decimal(Int(battery) + 2847, 3)),
            Reading("wake", bool: status & 0x01 != 0),
        ]
    }
}
