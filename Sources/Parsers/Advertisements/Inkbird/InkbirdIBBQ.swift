import Bluetooth

/// Inkbird iBBQ grill thermometers IBT-2X(S) (2 probes), IBT-4X(S/C) (4), IBT-6XS and Tenergy
/// SOLIS-6 (6), manufacturer id 0x0000 (MAC in order) or 0x0001 (MAC reversed): `00 00`, the
/// device's MAC (6 bytes), then one int16 LE × 0.1 °C per probe; an unplugged probe sends `F6 FF`
/// (some firmware `FF FF`) and reads null. Other values are signed: a probe in a freezer or a cold
/// smoker reads below 0 °C (`CE FF` = −5.0 °C, inkbird-ble issue #155), so a high byte `FF` alone
/// does not mean unplugged (Theengs decoder `IBT_2X_json.h`, `IBT_4XS_json.h`,
/// `IBT_6XS_SOLIS6_json.h` treat it so; inkbird-ble does not).
///
/// Company ids 0 and 1 belong to other firms, so the frame must be 12, 16 or 20 bytes starting
/// `00 00`, and the embedded MAC must equal the sender's address when that is known; a local
/// name, when present, must start `iBBQ` or `xBBQ`.
public struct InkbirdIBBQ: AdvertisementParser {
    public init() {}
    public var format: String { "inkbird_ibbq" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x0000), .manufacturer(0x0001)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard [12, 16, 20].contains(payload.count) else { return nil }
        var reader = ByteReader(payload, what: "Inkbird iBBQ")
        guard try reader.u16le() == 0 else { return nil }
        let mac = try reader.bytes(6)
        if let name = context.advertisement.localName, !name.hasPrefix("iBBQ"), !name.hasPrefix("xBBQ") { return nil }
        if let address = context.address {
            let embedded =
                key == .manufacturer(0x0001)
                ? BluetoothAddress(littleEndianOctets: mac) : BluetoothAddress(octets: mac)
            guard embedded == address else { return nil }
        }
        var readings = [Reading].reserved()
        var probe = 1
        while !reader.isAtEnd {
            let raw = try reader.u16le()
            let quantity = probe == 1 ? Quantity.temperature : Quantity.temperature.named("temperature_\(probe)")
            let unplugged = raw == 0xFFF6 || raw == 0xFFFF
            readings.append(Reading(quantity, unplugged ? nil : decimal(Int16(bitPattern: raw), 1)))
            probe += 1
        }
        return readings
    }
}
