import Bluetooth

/// Eddystone-URL frame (google/eddystone `eddystone-url`), service data 0xFEAA, frame type
/// 0x10: tx power, scheme prefix byte, then the URL with bytes 0x00-0x0D standing for `.com/`,
/// `.org/`, … `.gov`.
public struct EddystoneURL: AdvertisementParser {
    public init() {}
    public var format: String { "eddystone_url" }
    public var keys: [AdvertisementKey] { [.serviceData(0xFEAA)] }

    static let schemes = ["http://www.", "https://www.", "http://", "https://"]
    static let expansions = [
        ".com/", ".org/", ".edu/", ".net/", ".info/", ".biz/", ".gov/",
        ".com", ".org", ".edu", ".net", ".info", ".biz", ".gov",
    ]

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.first == 0x10 else { return nil }
        var reader = ByteReader(payload, from: 1, what: "Eddystone-URL")
        let power = try reader.s8()
        let scheme = Int(try reader.u8())
        guard scheme < Self.schemes.count else {
            throw ParseError(.reservedValue, "Eddystone-URL scheme byte \(scheme) is reserved")
        }
        var url = Self.schemes[scheme]
        for byte in reader.rest() {
            if Int(byte) < Self.expansions.count {
                url += Self.expansions[Int(byte)]
            } else if byte > 0x20, byte < 0x7F {
                url.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                throw ParseError(.malformed, "Eddystone-URL byte 0x\(String(byte, radix: 16)) is not allowed in a URL")
            }
        }
        return [Reading(.txPower, Double(power)), Reading("url", string: url)]
    }
}
