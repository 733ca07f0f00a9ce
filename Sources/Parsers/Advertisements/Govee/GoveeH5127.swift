import Bluetooth

/// Govee H5127 presence sensor (govee-ble), manufacturer id 0x8803 (firmware 1.00.13 and later
/// 0x8843), 6 bytes: `EC 00 01|02 01`, presence (`01` occupied), motion (`11` moving).
public struct GoveeH5127: AdvertisementParser {
    public init() {}
    public var format: String { "govee_h5127" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x8803), .manufacturer(0x8843)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count == 6, payload[0] == 0xEC, payload[1] == 0x00 else { return nil }
        var reader = ByteReader(payload, from: 4, what: "Govee H5127")
        let present = try reader.u8() == 0x01
        let motion = try reader.u8() == 0x11
        return [
            Reading("occupancy", bool: present, deviceClass: .occupancy),
            Reading("motion", bool: motion, deviceClass: .motion),
        ]
    }
}
