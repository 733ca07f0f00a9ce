import Bluetooth

/// Oras smart faucet, manufacturer 0x0131 (a Cypress id other Cypress-based devices share),
/// 18 bytes: `00`, battery (bits 0–6, %), `00`, serial number (10 ASCII characters), `00`, four
/// spaces. Recognised by that shape. Layout: Theengs decoder `devices/Oras_json.h`.
public struct OrasFaucet: AdvertisementParser {
    public init() {}
    public var format: String { "oras_faucet" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x0131)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count == 18 else { return nil }
        var reader = ByteReader(payload, what: "Oras faucet")
        let header = try reader.u8()
        let battery = try reader.u8()
        let separator = try reader.u8()
        let serial = try reader.bytes(10)
        let terminator = try reader.u8()
        guard header == 0, separator == 0, terminator == 0, serial.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else {
            return nil
        }
        return [
            Reading("serial", string: String(decoding: serial, as: UTF8.self)),
            Reading(.battery, Double(battery & 0x7F)),
        ]
    }
}
