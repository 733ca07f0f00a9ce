import Parsers

/// The Mystery Tag, a made-up beacon: manufacturer data of company id 0xFFFF (the id the
/// Bluetooth SIG leaves for tests and prototypes) that starts with "MT".
///
///     4D 54   "MT"
///     01      format version
///     xx      sequence number, one more for every new reading
///     xx xx   temperature, signed little endian, 0.01 °C
///     xx      battery, %
///     xx      mystery level, 0–10
struct MysteryTag: AdvertisementParser {
    /// The name that comes with the readings (`bridge/devices`, the web page's radio view).
    var format: String { "mystery_tag" }
    /// Only manufacturer data of 0xFFFF is offered to this parser.
    var keys: [AdvertisementKey] { [.manufacturer(0xFFFF)] }

    func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext) throws(ParseError)
        -> [Reading]?
    {
        // Not ours (other prototypes use 0xFFFF too): nil, so another parser may take it.
        guard payload.count >= 3, payload[0] == 0x4D, payload[1] == 0x54 else { return nil }
        // Ours, but wrong: an error, never a trap (the bytes come from the radio).
        guard payload[2] == 1 else {
            throw ParseError(.unsupported, "Mystery Tag format version \(payload[2])")
        }
        var reader = ByteReader(payload, from: 3, what: "Mystery Tag")
        _ = try reader.u8()  // the sequence number: frameCounter(_:readings:) below
        let temperature = Double(try reader.s16le()) / 100
        let battery = try reader.u8()
        let level = try reader.u8()
        guard battery <= 100 else { throw ParseError(.reservedValue, "battery \(battery) % is above 100 %") }
        guard level <= 10 else { throw ParseError(.malformed, "mystery level \(level) is above 10") }
        return [
            Reading(.temperature, temperature),
            Reading(.battery, Double(battery)),
            Reading("mystery_level", Double(level)),
        ]
    }

    /// A retransmitted frame repeats its sequence number: the gateway publishes each one once.
    func frameCounter(_ payload: [UInt8], readings: [Reading]) -> UInt32? {
        payload.count > 3 ? UInt32(payload[3]) : nil
    }
}
