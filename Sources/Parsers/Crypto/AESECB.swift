import Bluetooth
internal import CCrypto

/// AES-128 in ECB mode without padding (whole 16-byte blocks), with libcrypto's EVP interface:
/// Govee's H5121–H5130 sensors encrypt one block with a key derived from the frame itself.
///
/// Like ``AESCCM``, every libcrypto call's result is checked and any failure gives nil.
package enum AESECB {
    /// Decrypts whole blocks; nil when the key is not 16 bytes or the data not a multiple of 16.
    package static func decrypt(key: [UInt8], ciphertext: [UInt8]) -> [UInt8]? {
        run(encrypt: false, key: key, input: ciphertext)
    }

    /// Encrypts whole blocks (for tests and fuzz seeds).
    package static func encrypt(key: [UInt8], plaintext: [UInt8]) -> [UInt8]? {
        run(encrypt: true, key: key, input: plaintext)
    }

    private static func run(encrypt: Bool, key: [UInt8], input: [UInt8]) -> [UInt8]? {
        guard key.count == 16, !input.isEmpty, input.count % 16 == 0, let length = Int32(exactly: input.count),
            let context = EVP_CIPHER_CTX_new()
        else { return nil }
        defer { EVP_CIPHER_CTX_free(context) }
        var output = [UInt8](repeating: 0, count: input.count + 16)
        var outLength: Int32 = 0
        var finalLength: Int32 = 0
        guard EVP_CipherInit_ex(context, EVP_aes_128_ecb(), nil, key, nil, encrypt ? 1 : 0) == 1,
            EVP_CIPHER_CTX_set_padding(context, 0) == 1,
            EVP_CipherUpdate(context, &output, &outLength, input, length) == 1
        else {
            ERR_clear_error()
            return nil
        }
        let done = output.withUnsafeMutableBufferPointer { buffer -> Bool in
            guard let base = buffer.baseAddress else { return false }
            return EVP_CipherFinal_ex(context, base + Int(outLength), &finalLength) == 1
        }
        guard done, Int(outLength + finalLength) == input.count else {
            ERR_clear_error()
            return nil
        }
        output.removeLast(output.count - input.count)
        return output
    }
}
