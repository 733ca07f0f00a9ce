import Bluetooth

/// Apple iBeacon (Proximity Beacon specification), manufacturer id 0x004C: `02 15`, proximity
/// UUID (16), major and minor (uint16 BE), measured power (int8 dBm at 1 m). Other Apple
/// payloads (Continuity) are not claimed. A positive measured-power byte cannot be an RSSI at
/// 1 m; several sensor beacons put the battery voltage there in 0.1 V, published as `voltage`.
///
/// Sensor beacons that wrap readings in the frame (Tilt, ABTemp, Jaalee) have their own parsers
/// on the same key, registered after this one so they are tried first; they decline frames that
/// are not theirs, which then come here.
public struct IBeacon: AdvertisementParser {
    public init() {}
    public var format: String { "ibeacon" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x004C)] }
    public var isGeneric: Bool { true }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        try IBeaconFrame(payload)?.readings()
    }
}
