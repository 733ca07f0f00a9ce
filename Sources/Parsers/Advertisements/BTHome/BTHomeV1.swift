import Bluetooth

/// BTHome v1 (legacy; bthome.io/v1), service data UUID 0x181C (plain) or 0x181E (encrypted).
///
/// Each object is `length/format byte` (bits 0-4 length including the id, bits 5-7 data type:
/// 0 unsigned, 1 signed, 2 float, 3 string, 4 raw) + `id` + LE value; the id gives name and
/// factor as in v2. Encrypted frames: AES-128-CCM, ciphertext + 4-byte counter + 4-byte MIC,
/// nonce = MAC + `1E 18` + counter, associated data `0x11`.
public struct BTHomeV1: AdvertisementParser {
    public init() {}
    public var format: String { "bthome_v1" }
    public var keys: [AdvertisementKey] { [.serviceData(0x181C), .serviceData(0x181E)] }
    /// The packet id object (an encrypted frame without one is known by its bytes, which hold
    /// its counter).
    public func frameCounter(_ payload: [UInt8], readings: [Reading]) -> UInt32? {
        readings.frameCounter(named: "packet_id")
    }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        var readings = [Reading].reserved()
        if key == .serviceData(0x181E) {
            guard let bindKey = context.bindKey else {
                throw ParseError(.missingKey, "BTHome v1 frame is encrypted; configure the device's bind key")
            }
            guard let address = context.address else {
                throw ParseError(.missingKey, "BTHome v1 decryption needs the device address")
            }
            guard payload.count >= 9 else { throw .tooShort("encrypted BTHome v1 frame", need: 9, got: payload.count) }
            let counter = Array(payload[(payload.count - 8)..<(payload.count - 4)])
            let tag = Array(payload[(payload.count - 4)...])
            let nonce = address.octets + [0x1E, 0x18] + counter
            guard
                let plain = AESCCM.decrypt(
                    key: bindKey, nonce: nonce, ciphertext: Array(payload[0..<(payload.count - 8)]),
                    tag: tag, aad: [0x11])
            else {
                throw ParseError(.decryptionFailed, "BTHome v1 MIC check failed (wrong bind key or address)")
            }
            try Self.objects(plain, into: &readings)
        } else {
            try Self.objects(payload, into: &readings)
        }
        return readings
    }

    static func objects(_ bytes: [UInt8], into readings: inout [Reading]) throws(ParseError) {
        var names = BTHomeObject.NameSet()
        var offset = 0
        while offset < bytes.count {
            let header = bytes[offset]
            let length = Int(header & 0x1F)
            let dataType = header >> 5
            guard length >= 2, offset + 1 + length <= bytes.count,
                let object = BTHomeObject.table[Int(bytes[offset + 1])]
            else { break }
            let valueLength = length - 1
            if valueLength <= 8 || object.kind == .text || object.kind == .raw {
                names.insert(object)
                let before = readings.count
                try object.decode(
                    bytes, start: offset + 2, length: valueLength, float: dataType == 2,
                    signedOverride: dataType == 1 ? true : (dataType == 0 ? false : nil), into: &readings)
                names.tag(object, appended: readings.count - before)
            }
            offset += 1 + length
        }
        if names.needsPass { BTHomeObject.numberRepeatedNames(&readings, names: names) }
    }
}
