internal import CCrypto

/// AES-128 encryption of single 16-byte blocks under one key, with the key schedule made once:
/// the `ah` function of the Core spec (Vol 3 Part H 2.2.2), which resolves a resolvable private
/// address against an Identity Resolving Key, runs it once per (address, key) pair tried, so the
/// context is kept rather than set up per block as ``AESECB`` does.
///
/// ECB without padding keeps no state from block to block, so one `EVP_EncryptUpdate` per block
/// on the same context is the cipher of that block alone. Every libcrypto call's result is
/// checked; a failure gives nil. Not thread-safe: the owner confines it (the gateway's loop).
package final class AESBlockCipher {
    private let context: OpaquePointer

    /// Nil when the key is not 16 bytes or libcrypto refuses it.
    package init?(key: [UInt8]) {
        guard key.count == 16, let context = EVP_CIPHER_CTX_new() else { return nil }
        guard EVP_EncryptInit_ex(context, EVP_aes_128_ecb(), nil, key, nil) == 1,
            EVP_CIPHER_CTX_set_padding(context, 0) == 1
        else {
            ERR_clear_error()
            EVP_CIPHER_CTX_free(context)
            return nil
        }
        self.context = context
    }

    deinit { EVP_CIPHER_CTX_free(context) }

    /// The encryption of one block (most significant byte first, as the Core spec's `e`
    /// function takes and gives it); nil when `block` is not 16 bytes or libcrypto fails.
    package func encrypt(_ block: [UInt8]) -> [UInt8]? {
        guard block.count == 16 else { return nil }
        var output = [UInt8](repeating: 0, count: 32)
        var length: Int32 = 0
        guard EVP_EncryptUpdate(context, &output, &length, block, 16) == 1, length == 16 else {
            ERR_clear_error()
            return nil
        }
        output.removeLast(16)
        return output
    }
}
