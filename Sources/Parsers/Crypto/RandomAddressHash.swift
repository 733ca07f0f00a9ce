import Bluetooth

/// The Core spec's random address hash function `ah` (Vol 3 Part H 2.2.2): `ah(k, r) = e(k, r')
/// mod 2^24`, where `r'` is the 24-bit `r` padded with 104 zero bits on the most significant side
/// and `e` is AES-128 with the key `k`, both most significant byte first.
public enum RandomAddressHash {
    /// `ah(irk, prand)` with `cipher` made from the IRK; nil only when libcrypto fails.
    package static func ah(_ cipher: AESBlockCipher, prand: UInt32) -> UInt32? {
        var block = [UInt8](repeating: 0, count: 16)
        block[13] = UInt8(truncatingIfNeeded: prand >> 16)
        block[14] = UInt8(truncatingIfNeeded: prand >> 8)
        block[15] = UInt8(truncatingIfNeeded: prand)
        guard let output = cipher.encrypt(block) else { return nil }
        return UInt32(output[13]) << 16 | UInt32(output[14]) << 8 | UInt32(output[15])
    }

    /// Whether the resolvable private `address` was made from the IRK of `cipher`: its low 24 bits
    /// are `ah` of its high 24 bits.
    package static func matches(_ address: BluetoothAddress, _ cipher: AESBlockCipher) -> Bool {
        let prand = UInt32(truncatingIfNeeded: address.rawValue >> 24)
        let hash = UInt32(truncatingIfNeeded: address.rawValue & 0xFF_FFFF)
        return ah(cipher, prand: prand) == hash
    }

    /// A resolvable private address made from `cipher`'s IRK and the 22 random bits of `random`
    /// (for tests, the simulator and the bench: what a phone does every ~15 minutes).
    package static func address(_ cipher: AESBlockCipher, random: UInt32) -> BluetoothAddress? {
        let prand = 0x40_0000 | (random & 0x3F_FFFF)
        guard let hash = ah(cipher, prand: prand) else { return nil }
        return BluetoothAddress(rawValue: UInt64(prand) << 24 | UInt64(hash))
    }
}
