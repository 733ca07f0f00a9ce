import Bluetooth

/// The AES-128-CCM sealing of the two encrypted 0x181A beacons of pvvx's ATC_MiThermometer
/// firmware (``ATC1441Encrypted``, ``PVVXEncrypted``), shared by both.
///
/// Service data after the UUID: frame counter (1 byte), ciphertext, 4-byte MIC. Nonce (11
/// bytes): the device MAC least significant octet first (the firmware's `mac_public`), then the
/// AD structure's first five bytes — its length byte (the service data length + 3), the AD type
/// `0x16`, the UUID `1A 18` and the frame counter. Associated data: the single byte `0x11`.
/// Source: pvvx/ATC_MiThermometer `src/custom_beacon.c` (`atc_encrypt_data_beacon`,
/// `pvvx_encrypt_data_beacon`) and `custom_beacon.h` (`adv_cust_head_t`), `test_adv_cust.py`;
/// the same nonce in bleparser 3.7.3 `atc.py` (`decrypt_atc`).
enum ATCEncryption {
    static let micLength = 4

    /// The nonce of a frame of `payloadCount` service-data bytes (UUID not counted).
    static func nonce(address: BluetoothAddress, payloadCount: Int, counter: UInt8) -> [UInt8] {
        Array(address.octets.reversed()) + [UInt8(truncatingIfNeeded: payloadCount + 3), 0x16, 0x1A, 0x18, counter]
    }

    /// The frame counter and the plaintext of `payload`, after the MIC check; throws
    /// `missing_key` without a bind key or address, `decryption_failed` when the MIC does not match.
    static func open(_ payload: [UInt8], context: AdvertisementContext, what: String) throws(ParseError)
        -> (counter: UInt8, plaintext: [UInt8])
    {
        guard let bindKey = context.bindKey else {
            throw ParseError(.missingKey, "\(what) frame is encrypted; configure the device's bind key")
        }
        guard let address = context.address else {
            throw ParseError(.missingKey, "\(what) decryption needs the device address")
        }
        guard payload.count > 1 + micLength else {
            throw .tooShort("\(what) frame", need: 2 + micLength, got: payload.count)
        }
        var reader = ByteReader(payload, what: what)
        let counter = try reader.u8()
        let ciphertext = try reader.bytes(payload.count - 1 - micLength)
        let tag = try reader.bytes(micLength)
        guard
            let plaintext = AESCCM.decrypt(
                key: bindKey, nonce: nonce(address: address, payloadCount: payload.count, counter: counter),
                ciphertext: ciphertext, tag: tag, aad: [0x11])
        else {
            throw ParseError(.decryptionFailed, "\(what) MIC check failed (wrong bind key or address)")
        }
        return (counter, plaintext)
    }
}
