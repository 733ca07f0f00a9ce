import Bluetooth

/// BTHome v2 (bthome.io/format), service data UUID 0xFCD2.
///
/// One device-information byte (bit 0 encrypted, bit 1 MAC included, bit 2 trigger-based,
/// bits 5-7 version = 2), then objects of `id + fixed-length LE value`. Repeated ids are
/// numbered (`temperature_1`, `temperature_2`); an unknown id or a truncated last object ends
/// the payload, keeping the readings before it. Encrypted frames are AES-128-CCM with the
/// device's bind key: ciphertext + 4-byte counter + 4-byte MIC, nonce = MAC + `D2 FC` + device
/// info + counter. The counter is published as `encryption_counter` so the caller can reject
/// replays (counters going backwards).
public struct BTHomeV2: AdvertisementParser {
    public init() {}
    public var format: String { "bthome_v2" }
    public var keys: [AdvertisementKey] { [.serviceData(0xFCD2)] }
    /// The packet id object, else (encrypted) the encryption counter.
    public func frameCounter(_ payload: [UInt8], readings: [Reading]) -> UInt32? {
        readings.frameCounter(named: "packet_id") ?? readings.frameCounter(named: "encryption_counter")
    }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard let info = payload.first else { throw ParseError(.tooShort, "BTHome v2 payload is empty") }
        guard info >> 5 == 2 else {
            throw ParseError(
                .unsupported, "BTHome device information byte 0x\(String(info, radix: 16)) is not version 2")
        }
        var start = 1
        var address = context.address
        if info & 0x02 != 0 {
            guard payload.count >= 7 else { throw .tooShort("BTHome v2 MAC", need: 7, got: payload.count) }
            address = BluetoothAddress(littleEndianOctets: payload[1..<7])
            start = 7
        }
        var readings = [Reading].reserved()
        if info & 0x01 != 0 {
            guard let key = context.bindKey else {
                throw ParseError(.missingKey, "BTHome v2 frame is encrypted; configure the device's bind key")
            }
            guard let address else {
                throw ParseError(.missingKey, "BTHome v2 decryption needs the device address")
            }
            guard payload.count >= start + 8 else {
                throw .tooShort("encrypted BTHome v2 frame", need: start + 8, got: payload.count)
            }
            let counter = Array(payload[(payload.count - 8)..<(payload.count - 4)])
            let tag = Array(payload[(payload.count - 4)...])
            let ciphertext = Array(payload[start..<(payload.count - 8)])
            let nonce = address.octets + [0xD2, 0xFC, info] + counter
            guard let plain = AESCCM.decrypt(key: key, nonce: nonce, ciphertext: ciphertext, tag: tag) else {
                throw ParseError(.decryptionFailed, "BTHome v2 MIC check failed (wrong bind key or address)")
            }
            try BTHomeV2.objects(plain, from: 0, into: &readings)
            let count =
                UInt32(counter[0]) | UInt32(counter[1]) << 8 | UInt32(counter[2]) << 16 | UInt32(counter[3]) << 24
            readings.append(Reading("encryption_counter", Double(count)))
        } else {
            try BTHomeV2.objects(payload, from: start, into: &readings)
        }
        return readings
    }

    /// Decodes v2 objects from `start` to the end of `bytes`.
    static func objects(_ bytes: [UInt8], from start: Int, into readings: inout [Reading]) throws(ParseError) {
        var names = BTHomeObject.NameSet()
        var offset = start
        while offset < bytes.count {
            let id = bytes[offset]
            guard let object = BTHomeObject.table[Int(id)], let length = valueLength(object, bytes, offset + 1) else {
                break
            }
            let valueStart = offset + 1 + (object.size == 0 ? 1 : 0)
            guard valueStart + length <= bytes.count else { break }
            names.insert(object)
            let before = readings.count
            try object.decode(
                bytes, start: valueStart, length: length, float: false, signedOverride: nil, into: &readings)
            names.tag(object, appended: readings.count - before)
            offset = valueStart + length
        }
        if names.needsPass { BTHomeObject.numberRepeatedNames(&readings, names: names) }
    }

    /// The value length of an object at `offset`: fixed, or the length byte for text/raw.
    @inline(__always)
    static func valueLength(_ object: BTHomeObject, _ bytes: [UInt8], _ offset: Int) -> Int? {
        if object.size > 0 { return object.size }
        guard offset < bytes.count else { return nil }
        return Int(bytes[offset])
    }
}
