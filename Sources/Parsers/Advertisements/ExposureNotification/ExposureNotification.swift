import Bluetooth

/// Google/Apple Exposure Notification beacons (the GAEN "Bluetooth Specification" v1.2; Theengs
/// `GAEN_json.h`), service data 0xFD6F, 20 bytes: the 16-byte Rolling Proximity Identifier and
/// 4 bytes of Associated Encrypted Metadata, reported as lower-case hex strings `rpi`, `aem`.
public struct ExposureNotification: AdvertisementParser {
    public init() {}
    public var format: String { "exposure_notification" }
    public var keys: [AdvertisementKey] { [.serviceData(0xFD6F)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        var reader = ByteReader(payload, what: "Exposure Notification")
        guard payload.count == 20 else {
            throw ParseError.length("Exposure Notification", expected: 20, got: payload.count)
        }
        let rpi = try reader.bytes(16)
        let aem = try reader.bytes(4)
        return [Reading("rpi", string: Hex.encode(rpi)), Reading("aem", string: Hex.encode(aem))]
    }
}
