import Bluetooth

/// Apple iBeacon (Proximity Beacon specification), manufacturer id 0x004C: `02 15`, proximity
/// UUID (16), major and minor (uint16 BE), measured power (int8 dBm at 1 m). Other Apple
/// payloads (Continuity) are not claimed. A positive measured-power byte cannot be an RSSI at
/// 1 m; several sensor beacons put the battery voltage there in 0.1 V, published as `voltage`.
public struct IBeacon: AdvertisementParser {
    public init() {}
    public var format: String { "ibeacon" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x004C)] }
    public var isGeneric: Bool { true }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count >= 2, payload[0] == 0x02, payload[1] == 0x15 else { return nil }
        guard payload.count >= 23 else { throw .tooShort("iBeacon", need: 23, got: payload.count) }
        let uuid = BluetoothUUID(bytes: payload, at: 2)
        var reader = ByteReader(payload, from: 18, what: "iBeacon")
        let major = try reader.u16be()
        let minor = try reader.u16be()
        let power = try reader.s8()
        let text = uuid?.description ?? ""
        return [
            Reading("uuid", string: text),
            Reading("major", Double(major)),
            Reading("minor", Double(minor)),
            power > 0 ? Reading(.voltage, decimal(power, 1)) : Reading(.txPower, Double(power)),
        ]
    }
}
