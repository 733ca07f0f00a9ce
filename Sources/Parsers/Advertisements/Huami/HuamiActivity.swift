import Bluetooth

/// Xiaomi Mi Band / Amazfit watches (Huami, company id 0x0157): the broadcast activity data.
///
/// Manufacturer data, 24 bytes: byte 0 = 0x02 when byte 3 holds the current heart rate (bpm,
/// 0xFF = none), bytes 18-23 the device address; the step count rides in service data 0xFEE0
/// (4 bytes, steps u16 LE first). Source: Theengs decoder `Miband_json.h`. A frame with neither
/// value is `unsupported`.
public struct HuamiActivity: AdvertisementParser {
    public init() {}
    public var format: String { "huami_activity" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x0157)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count == 24 else { return nil }
        var reader = ByteReader(payload, what: "Huami activity")
        let kind = try reader.u8()
        try reader.skip(2)
        let heartRate = try reader.u8()
        var readings = [Reading].reserved()
        if let steps = context.advertisement.serviceData[BluetoothUUID(0xFEE0)], steps.count == 4 {
            var stepReader = ByteReader(steps, what: "Huami steps")
            readings.append(Reading("steps", Double(try stepReader.u16le())))
        }
        if kind == 0x02 && heartRate != 0xFF { readings.append(Reading(.heartRate, Double(heartRate))) }
        guard !readings.isEmpty else { throw ParseError(.unsupported, "Huami frame carries no heart rate or steps") }
        return readings
    }
}
