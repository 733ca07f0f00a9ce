import Bluetooth
internal import CCrypto

/// AES-128-CCM decryption with OpenSSL's libcrypto EVP interface (NIST SP 800-38C), as used by
/// BTHome v2, MiBeacon v4/v5 and pvvx encrypted advertisements.
///
/// With AESECB.swift and AESBlockCipher.swift, the only files that call libcrypto. Every call's result is checked; any failure,
/// including a MIC mismatch, gives nil. `package`, not public: the fuzz targets (same package)
/// encrypt plaintexts with it so the code after decryption is fuzzed too.
package enum AESCCM {
    /// Decrypts `ciphertext` and verifies the `tag` (MIC); nil when the key, nonce or tag are
    /// the wrong size or the tag does not match.
    package static func decrypt(key: [UInt8], nonce: [UInt8], ciphertext: [UInt8], tag: [UInt8], aad: [UInt8] = [])
        -> [UInt8]?
    {
        guard key.count == 16, (7...13).contains(nonce.count), [4, 6, 8, 10, 12, 14, 16].contains(tag.count),
            let ciphertextLength = Int32(exactly: ciphertext.count), let aadLength = Int32(exactly: aad.count)
        else {
            return nil
        }
        guard let context = EVP_CIPHER_CTX_new() else { return nil }
        defer { EVP_CIPHER_CTX_free(context) }
        var tagCopy = tag
        var outLength: Int32 = 0
        var plaintext = [UInt8](repeating: 0, count: max(ciphertext.count, 1))
        guard EVP_DecryptInit_ex(context, EVP_aes_128_ccm(), nil, nil, nil) == 1,
            EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_SET_IVLEN, Int32(truncatingIfNeeded: nonce.count), nil) == 1,
            EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_SET_TAG, Int32(truncatingIfNeeded: tag.count), &tagCopy) == 1,
            EVP_DecryptInit_ex(context, nil, nil, key, nonce) == 1,
            EVP_DecryptUpdate(context, nil, &outLength, nil, ciphertextLength) == 1
        else { return nil }
        if !aad.isEmpty {
            guard EVP_DecryptUpdate(context, nil, &outLength, aad, aadLength) == 1 else { return nil }
        }
        // In CCM mode this single update both decrypts and checks the tag.
        let verified = EVP_DecryptUpdate(context, &plaintext, &outLength, ciphertext, ciphertextLength)
        guard verified > 0, Int(outLength) == ciphertext.count else {
            ERR_clear_error()
            return nil
        }
        plaintext.removeLast(plaintext.count - ciphertext.count)
        return plaintext
    }

    /// Encrypts for tests, simulators and fuzz targets: returns ciphertext and tag, nil on failure.
    package static func encrypt(key: [UInt8], nonce: [UInt8], plaintext: [UInt8], tagLength: Int, aad: [UInt8] = [])
        -> (ciphertext: [UInt8], tag: [UInt8])?
    {
        guard key.count == 16, (7...13).contains(nonce.count), (4...16).contains(tagLength),
            let plaintextLength = Int32(exactly: plaintext.count), let aadLength = Int32(exactly: aad.count),
            let context = EVP_CIPHER_CTX_new()
        else { return nil }
        defer { EVP_CIPHER_CTX_free(context) }
        var outLength: Int32 = 0
        var ciphertext = [UInt8](repeating: 0, count: max(plaintext.count, 1))
        var tag = [UInt8](repeating: 0, count: tagLength)
        guard EVP_EncryptInit_ex(context, EVP_aes_128_ccm(), nil, nil, nil) == 1,
            EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_SET_IVLEN, Int32(truncatingIfNeeded: nonce.count), nil) == 1,
            EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_SET_TAG, Int32(truncatingIfNeeded: tagLength), nil) == 1,
            EVP_EncryptInit_ex(context, nil, nil, key, nonce) == 1,
            EVP_EncryptUpdate(context, nil, &outLength, nil, plaintextLength) == 1
        else { return nil }
        if !aad.isEmpty {
            guard EVP_EncryptUpdate(context, nil, &outLength, aad, aadLength) == 1 else { return nil }
        }
        guard EVP_EncryptUpdate(context, &ciphertext, &outLength, plaintext, plaintextLength) == 1,
            EVP_EncryptFinal_ex(context, &ciphertext, &outLength) == 1,
            EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_GET_TAG, Int32(truncatingIfNeeded: tagLength), &tag) == 1
        else { return nil }
        ciphertext.removeLast(ciphertext.count - plaintext.count)
        return (ciphertext, tag)
    }
}
