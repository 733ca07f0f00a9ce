import Bluetooth

/// Jaalee F525 / F51C temperature-humidity beacons: a 24-byte iBeacon (manufacturer 0x004C,
/// `02 15`) with one extra byte. Major = temperature as the SHT raw value (−45 + 175 × raw /
/// 65535 °C), minor = humidity (100 × raw / 65535 %), the power byte is tx power, the extra
/// byte is battery %. Recognised by the length plus the F525/F51C service UUID the device
/// lists, or its proximity UUID `EBEFD083-70A2-47C8-9837-E7B5634DF5xx`. Layout: Theengs decoder
/// `devices/JAALEE_json.h`.
public struct JaaleeBeacon: AdvertisementParser {
    public init() {}
    public var format: String { "jaalee" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x004C)] }

    static let uuidPrefix: [UInt8] = [
        0xEB, 0xEF, 0xD0, 0x83, 0x70, 0xA2, 0x47, 0xC8, 0x98, 0x37, 0xE7, 0xB5, 0x63, 0x4D, 0xF5,
    ]
    static let services: Set<BluetoothUUID> = [BluetoothUUID(0xF525), BluetoothUUID(0xF51C)]

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count == 24, let frame = try IBeaconFrame(payload), let battery = frame.trailerFirst,
            frame.uuidHasPrefix(Self.uuidPrefix)
                || context.advertisement.serviceUUIDs.contains(where: { Self.services.contains($0) })
        else { return nil }
        var readings = frame.readings(major: false, minor: false)
        readings.append(Reading(.temperature, rounded(-45 + 175 * Double(frame.major) / 65535, 2)))
        readings.append(Reading(.humidity, rounded(100 * Double(frame.minor) / 65535, 2)))
        readings.append(Reading(.battery, Double(battery)))
        return readings
    }
}
