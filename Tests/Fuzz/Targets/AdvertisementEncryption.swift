import Bluetooth
import Parsers

/// The encrypt mode of ``FuzzTargets/advertisement``: the fuzzed bytes are a header and a
/// PLAINTEXT, framed and encrypted with the bind key exactly as each parser decrypts it (nonce,
/// associated data, counter and MIC placement read from the parser), so the object decoding
/// after a successful MIC check is fuzzed too.
///
/// Encoding (after the target's flags): format (u16 index: 0 BTHome v2 `FCD2`, 1 BTHome v1
/// `181E`, 2 MiBeacon `FE95`, 3 atc1441 encrypted `181A`, 4 pvvx encrypted `181A`), then per
/// format —
/// - BTHome v2: device-info byte (bits 1–4 kept; encrypted and version 2 forced), 4-byte
///   counter, 6 MAC bytes (on-air order) when bit 1 is set;
/// - BTHome v1: 4-byte counter;
/// - MiBeacon: frame control u16 (bits 0–2, 4, 5, 7–11 kept; encrypted, object-included and
///   version 4 or 5 forced), product id u16, frame counter, 6 MAC bytes when bit 4 is set, a
///   capability byte (+2 I/O bytes when its bit 5 is set) when bit 5 is set, 3-byte extended
///   counter;
/// - atc1441 / pvvx encrypted: frame counter byte;
/// then the plaintext (the rest; for the two ATC formats exactly 3 or 6 bytes, padded with zeros
/// or cut, since their frames have one length each).
enum AdvertisementEncryption {
    /// The bind key when the input carries none (the fixtures' BTHome test key).
    static let defaultKey: [UInt8] = [
        0x23, 0x1D, 0x39, 0xC1, 0xD7, 0xCC, 0x1A, 0xB1, 0xAE, 0xE2, 0x24, 0xCD, 0x09, 0x6D, 0xB9, 0x32,
    ]
    static let defaultAddress = BluetoothAddress("54:48:E6:8F:80:A5")!
    static let keys: [AdvertisementKey] = [
        .serviceData(0xFCD2), .serviceData(0x181E), .serviceData(0xFE95), .serviceData(0x181A), .serviceData(0x181A),
    ]

    /// Reads a format and header from `input`, encrypts the rest, and returns the key and the
    /// encrypted payload; fills in a bind key and address in `context` when the input has none.
    /// Encryption failures (a short bind key) leave the plaintext as the payload. `sealed`: the
    /// payload holds a non-empty plaintext under a valid MIC, which the parser must accept.
    static func frame(_ input: inout FuzzInput, context: inout AdvertisementContext)
        -> (key: AdvertisementKey, payload: [UInt8], sealed: Bool)
    {
        let format = input.index(keys.count)
        if context.bindKey == nil { context.bindKey = defaultKey }
        if context.address == nil { context.address = defaultAddress }
        let key = context.bindKey!
        let address = context.address!
        switch format {
        case 0:
            let info = (input.byte() & 0x1E) | 0x41
            let counter = padded(input.bytes(4), 4)
            var header = [info]
            var nonceAddress = address
            if info & 0x02 != 0 {
                let mac = padded(input.bytes(6), 6)
                header += mac
                nonceAddress = BluetoothAddress(littleEndianOctets: mac)!
            }
            let plaintext = input.rest()
            guard
                let sealed = AESCCM.encrypt(
                    key: key, nonce: nonceAddress.octets + [0xD2, 0xFC, info] + counter,
                    plaintext: plaintext, tagLength: 4)
            else { return (keys[0], header + plaintext, false) }
            return (keys[0], header + sealed.ciphertext + counter + sealed.tag, !plaintext.isEmpty)
        case 1:
            let counter = padded(input.bytes(4), 4)
            let plaintext = input.rest()
            guard
                let sealed = AESCCM.encrypt(
                    key: key, nonce: address.octets + [0x1E, 0x18] + counter, plaintext: plaintext,
                    tagLength: 4, aad: [0x11])
            else { return (keys[1], plaintext, false) }
            return (keys[1], sealed.ciphertext + counter + sealed.tag, !plaintext.isEmpty)
        case 3, 4:
            // pvvx firmware: nonce = MAC least significant octet first + the AD structure's
            // length (service data + 3), type 0x16, UUID 1A 18 and the counter; MIC after.
            let counter = input.byte()
            let size = format == 3 ? 3 : 6
            let plaintext = padded(input.bytes(size), size)
            let length = UInt8(1 + plaintext.count + 4 + 3)
            let nonce = Array(address.octets.reversed()) + [length, 0x16, 0x1A, 0x18, counter]
            guard let sealed = AESCCM.encrypt(key: key, nonce: nonce, plaintext: plaintext, tagLength: 4, aad: [0x11])
            else { return (keys[format], [counter] + plaintext, false) }
            return (keys[format], [counter] + sealed.ciphertext + sealed.tag, true)
        default:
            let raw = input.uint16()
            let version: UInt16 = raw & 0x8000 != 0 ? 5 : 4
            let control = (raw & 0x0FB7) | 0x0048 | version << 12
            let productID = input.uint16()
            let frameCounter = input.byte()
            var header = [
                UInt8(truncatingIfNeeded: control), UInt8(truncatingIfNeeded: control >> 8),
                UInt8(truncatingIfNeeded: productID), UInt8(truncatingIfNeeded: productID >> 8), frameCounter,
            ]
            var mac = Array(address.octets.reversed())
            if control & 0x10 != 0 {
                mac = padded(input.bytes(6), 6)
                header += mac
            }
            if control & 0x20 != 0 {
                let capability = input.byte()
                header.append(capability)
                if capability & 0x20 != 0 { header += padded(input.bytes(2), 2) }
            }
            let extended = padded(input.bytes(3), 3)
            let plaintext = input.rest()
            let nonce = mac + [header[2], header[3], frameCounter] + extended
            guard let sealed = AESCCM.encrypt(key: key, nonce: nonce, plaintext: plaintext, tagLength: 4, aad: [0x11])
            else { return (keys[2], header + plaintext, false) }
            return (keys[2], header + sealed.ciphertext + extended + sealed.tag, !plaintext.isEmpty)
        }
    }

    /// An encrypt-mode input for an unencrypted fixture payload of BTHome v2, BTHome v1,
    /// MiBeacon, ATC1441 or pvvx: its objects (the ATC formats: their readings' bytes) become the
    /// plaintext; nil for other payloads.
    static func seed(key: AdvertisementKey, payload: [UInt8], address: BluetoothAddress?) -> [UInt8]? {
        var builder = FuzzInputBuilder()
        builder.index(0)
        builder.byte(8 | (address != nil ? 2 : 0))
        if let address { builder.rest(address.octets) }
        switch key {
        case .serviceData(0xFCD2):
            guard let info = payload.first, info & 0x01 == 0 else { return nil }
            builder.index(0)
            builder.byte(info & 0x1E)
            builder.rest([1, 0, 0, 0])
            let start = info & 0x02 != 0 ? 7 : 1
            guard payload.count > start else { return nil }
            if info & 0x02 != 0 { builder.rest(Array(payload[1..<7])) }
            builder.rest(Array(payload[start...]))
        case .serviceData(0x181C):
            builder.index(1)
            builder.rest([1, 0, 0, 0])
            builder.rest(payload)
        case .serviceData(0xFE95):
            guard payload.count >= 5 else { return nil }
            let control = UInt16(payload[0]) | UInt16(payload[1]) << 8
            guard control & 0x48 == 0x40 else { return nil }
            var offset = 5 + (control & 0x10 != 0 ? 6 : 0)
            if control & 0x20 != 0 {
                guard payload.count > offset else { return nil }
                offset += payload[offset] & 0x20 != 0 ? 3 : 1
            }
            guard payload.count > offset else { return nil }
            builder.index(2)
            builder.rest(Array(payload[0..<offset]))
            builder.rest([1, 0, 0])
            builder.rest(Array(payload[offset...]))
        case .serviceData(0x181A) where payload.count == 13:
            // ATC1441: counter, then temperature (its low byte), humidity and battery.
            builder.index(3)
            builder.rest([payload[12], payload[7], payload[8], payload[9]])
        case .serviceData(0x181A) where payload.count == 15:
            // pvvx: counter, then temperature, humidity, battery % and flags.
            builder.index(4)
            builder.rest([payload[13]] + Array(payload[6..<10]) + [payload[12], payload[14]])
        default:
            return nil
        }
        return builder.bytes
    }

    static func padded(_ bytes: [UInt8], _ count: Int) -> [UInt8] {
        bytes + [UInt8](repeating: 0, count: max(0, count - bytes.count))
    }
}
