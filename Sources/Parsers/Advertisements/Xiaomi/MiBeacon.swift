import Bluetooth

/// Xiaomi MiBeacon (service data UUID 0xFE95), versions 2-5, as documented by the xiaomi-ble
/// and Theengs projects.
///
/// Frame: frame control (u16 LE: bit 3 encrypted, bit 4 MAC included, bit 5 capability
/// included, bit 6 object included, bits 12-15 version), product id (u16 LE), frame counter,
/// [MAC reversed], [capability (+ I/O byte)], objects `type (u16 LE) + length + value`.
/// Encrypted v4/v5 frames are AES-128-CCM with the bind key: objects + 3-byte extended counter
/// + 4-byte MIC, nonce = reversed MAC + product id + frame counter + extended counter, AAD
/// `0x11`. v2/v3 ("legacy") frames are AES-128-CCM without a MIC check (as xiaomi-ble reads
/// them; a 12-byte legacy key is widened to 16): a wrong key yields garbage objects, not
/// `decryption_failed`. Unknown object types are skipped; a frame with
/// no decodable object is `unsupported`.
public struct MiBeacon: AdvertisementParser {
    public init() {}
    public var format: String { "mibeacon" }
    public var keys: [AdvertisementKey] { [.serviceData(0xFE95)] }
    /// The frame counter (byte 4, after frame control and product id; in clear when encrypted).
    public func frameCounter(_ payload: [UInt8], readings: [Reading]) -> UInt32? {
        payload.count > 4 ? UInt32(payload[4]) : nil
    }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        var reader = ByteReader(payload, what: "MiBeacon")
        let control = try reader.u16le()
        let productID = try reader.u16le()
        try reader.skip(1)  // the frame counter (in the nonce, read there from the payload)
        let version = control >> 12
        var address = context.address
        if control & 0x10 != 0 {
            address = try reader.addressLE()
        }
        if control & 0x20 != 0 {
            let capability = try reader.u8()
            if capability & 0x20 != 0 { try reader.skip(2) }
        }
        var readings = [Reading].reserved()
        if let address { readings.append(Reading("mac", string: address.description)) }
        guard control & 0x40 != 0 else {
            throw ParseError(
                .unsupported, "MiBeacon frame carries no object (product 0x\(String(productID, radix: 16)))")
        }
        let objects: [UInt8]
        var objectStart = reader.offset
        if control & 0x08 != 0 {
            guard version >= 2 else {
                throw ParseError(.unsupported, "MiBeacon v\(version) encryption is not supported")
            }
            guard var key = context.bindKey else {
                throw ParseError(.missingKey, "MiBeacon frame is encrypted; configure the device's bind key")
            }
            // The nonce takes the MAC as the frame carries it, least significant octet first.
            guard let mac = address.map({ Array($0.octets.reversed()) }) else {
                throw ParseError(.missingKey, "MiBeacon decryption needs the device address")
            }
            if version <= 3 {
                // A 12-byte v2/v3 key is the 16-byte AES key without its fixed middle bytes.
                if key.count == 12 { key = Array(key[0..<6]) + [0x8D, 0x3D, 0x3C, 0x97] + Array(key[6...]) }
                objects = try Self.decryptLegacy(payload, from: reader.offset, key: key, mac: mac)
            } else {
                objects = try Self.decryptV4(payload, from: reader.offset, key: key, mac: mac, productID: productID)
            }
            objectStart = 0
        } else {
            objects = payload
        }
        let product = MiBeaconProduct(rawValue: productID)
        let before = readings.count
        var objectReader = ByteReader(objects, from: objectStart, what: "MiBeacon object")
        while objectReader.remaining >= 3 {
            let type = try objectReader.u16le()
            let length = Int(try objectReader.u8())
            guard objectReader.remaining >= length else { break }
            let start = objectReader.offset
            try objectReader.skip(length)
            var value = ByteReader(objects, from: start, to: start + length, what: "MiBeacon object")
            try Self.object(type, &value, product: product, into: &readings)
        }
        guard readings.count > before else {
            throw ParseError(
                .unsupported, "MiBeacon object types of product 0x\(String(productID, radix: 16)) are not decoded")
        }
        return readings
    }

    /// v4/v5: AES-128-CCM, objects + 3-byte extended counter + 4-byte MIC; nonce = MAC (frame
    /// order) + product id + frame counter + extended counter, AAD 0x11.
    static func decryptV4(_ payload: [UInt8], from start: Int, key: [UInt8], mac: [UInt8], productID: UInt16)
        throws(ParseError) -> [UInt8]
    {
        let end = payload.count
        guard end - start >= 8 else {
            throw .tooShort("encrypted MiBeacon frame", need: start + 8, got: end)
        }
        let ciphertext = Array(payload[start..<(end - 7)])
        let extended = Array(payload[(end - 7)..<(end - 4)])
        let tag = Array(payload[(end - 4)...])
        let nonce = mac + Array(payload[2..<5]) + extended
        guard let plain = AESCCM.decrypt(key: key, nonce: nonce, ciphertext: ciphertext, tag: tag, aad: [0x11]) else {
            throw ParseError(.decryptionFailed, "MiBeacon MIC check failed (wrong bind key or address)")
        }
        return plain
    }

    /// v2/v3: the CCM keystream without a usable MIC (objects + 3-byte extended counter + 1
    /// byte); nonce = frame control, product id, frame counter (5 bytes) + extended counter +
    /// the first 5 MAC bytes (frame order). A wrong key gives garbage objects, not an error.
    static func decryptLegacy(_ payload: [UInt8], from start: Int, key: [UInt8], mac: [UInt8])
        throws(ParseError) -> [UInt8]
    {
        let end = payload.count
        guard end - start >= 7 else {
            throw .tooShort("encrypted MiBeacon v2/v3 frame", need: start + 7, got: end)
        }
        let ciphertext = Array(payload[start..<(end - 4)])
        let nonce = Array(payload[0..<5]) + Array(payload[(end - 4)..<(end - 1)]) + Array(mac.prefix(5))
        // CCM encrypts with the counter-mode keystream A1, A2, …: encrypting zeros gives it.
        guard key.count == 16,
            let stream = AESCCM.encrypt(
                key: key, nonce: nonce, plaintext: [UInt8](repeating: 0, count: ciphertext.count), tagLength: 4)
        else {
            throw ParseError(.decryptionFailed, "MiBeacon v2/v3 key must be 12 or 16 bytes")
        }
        return zip(ciphertext, stream.ciphertext).map { $0 ^ $1 }
    }
}
