internal import CCrypto

/// The primitives of Noise_NNpsk0_25519_ChaChaPoly_SHA256 on OpenSSL's libcrypto: SHA-256,
/// HMAC-SHA-256 and the Noise HKDF, X25519 and ChaCha20-Poly1305 (RFC 8439, 96-bit nonce of 32
/// zero bits and the 64-bit little-endian counter, 16-byte tag).
///
/// The only file of ESPHomeAPI that calls libcrypto. Every call's result is checked: failures are
/// nil, never a trap.
package enum NoiseCrypto {
    package static let hashLength = 32
    package static let keyLength = 32
    package static let tagLength = 16

    package static func sha256<C: Collection<UInt8>>(_ data: C) -> [UInt8] {
        var input = Array(data)
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        if input.isEmpty { input = [0] }  // a valid pointer; the length below stays 0
        let ok = EVP_Digest(input, data.isEmpty ? 0 : input.count, &digest, &length, EVP_sha256(), nil)
        precondition(ok == 1 && length == 32, "SHA-256 is always available in libcrypto")
        return digest
    }

    /// HMAC-SHA-256 (RFC 2104), on the digest above.
    package static func hmac(key: [UInt8], data: [UInt8]) -> [UInt8] {
        var block = key.count > 64 ? sha256(key) : key
        block += [UInt8](repeating: 0, count: 64 - block.count)
        let inner = sha256(block.map { $0 ^ 0x36 } + data)
        return sha256(block.map { $0 ^ 0x5C } + inner)
    }

    /// Noise's HKDF(chaining_key, input_key_material, outputs): 2 or 3 outputs of 32 bytes.
    package static func hkdf(chainingKey: [UInt8], input: [UInt8], outputs: Int) -> [[UInt8]] {
        let tempKey = hmac(key: chainingKey, data: input)
        var result: [[UInt8]] = []
        var previous: [UInt8] = []
        for counter in 1...max(1, min(outputs, 3)) {
            previous = hmac(key: tempKey, data: previous + [UInt8(truncatingIfNeeded: counter)])
            result.append(previous)
        }
        return result
    }

    /// 32 random bytes from libcrypto's generator; nil if it fails.
    package static func randomKey() -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: 32)
        guard RAND_bytes(&bytes, 32) == 1 else { return nil }
        return bytes
    }

    /// The X25519 public key of `privateKey` (32 bytes); nil on a wrong size.
    package static func x25519PublicKey(privateKey: [UInt8]) -> [UInt8]? {
        guard privateKey.count == 32,
            let key = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nil, privateKey, 32)
        else { return nil }
        defer { EVP_PKEY_free(key) }
        var publicKey = [UInt8](repeating: 0, count: 32)
        var length = 32
        guard EVP_PKEY_get_raw_public_key(key, &publicKey, &length) == 1, length == 32 else { return nil }
        return publicKey
    }

    /// X25519(privateKey, peerPublicKey); nil on a wrong size or an all-zero result (a small-order
    /// peer key, which libcrypto refuses).
    package static func x25519(privateKey: [UInt8], peerPublicKey: [UInt8]) -> [UInt8]? {
        guard privateKey.count == 32, peerPublicKey.count == 32,
            let key = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nil, privateKey, 32)
        else { return nil }
        defer { EVP_PKEY_free(key) }
        guard let peer = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nil, peerPublicKey, 32) else { return nil }
        defer { EVP_PKEY_free(peer) }
        guard let context = EVP_PKEY_CTX_new(key, nil) else { return nil }
        defer { EVP_PKEY_CTX_free(context) }
        var secret = [UInt8](repeating: 0, count: 32)
        var length = 32
        guard EVP_PKEY_derive_init(context) == 1, EVP_PKEY_derive_set_peer(context, peer) == 1,
            EVP_PKEY_derive(context, &secret, &length) == 1, length == 32
        else {
            ERR_clear_error()
            return nil
        }
        return secret
    }

    private static func nonce(_ counter: UInt64) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 12)
        for index in 0..<8 { bytes[4 + index] = UInt8(truncatingIfNeeded: counter >> UInt64(8 * index)) }
        return bytes
    }

    /// ChaCha20-Poly1305 encryption: ciphertext followed by the 16-byte tag.
    package static func encrypt(key: [UInt8], counter: UInt64, ad: [UInt8], plaintext: [UInt8]) -> [UInt8]? {
        guard key.count == 32, let adLength = Int32(exactly: ad.count),
            let plaintextLength = Int32(exactly: plaintext.count), let context = EVP_CIPHER_CTX_new()
        else { return nil }
        defer { EVP_CIPHER_CTX_free(context) }
        var output = [UInt8](repeating: 0, count: plaintext.count + tagLength)
        var outLength: Int32 = 0
        guard EVP_EncryptInit_ex(context, EVP_chacha20_poly1305(), nil, key, nonce(counter)) == 1 else { return nil }
        if !ad.isEmpty {
            guard EVP_EncryptUpdate(context, nil, &outLength, ad, adLength) == 1 else { return nil }
        }
        var written = 0
        if !plaintext.isEmpty {
            guard EVP_EncryptUpdate(context, &output, &outLength, plaintext, plaintextLength) == 1 else { return nil }
            written = Int(outLength)
        }
        var tag = [UInt8](repeating: 0, count: tagLength)
        let finished = output.withUnsafeMutableBufferPointer { buffer -> Bool in
            guard let base = buffer.baseAddress, written <= plaintext.count else { return false }
            return EVP_EncryptFinal_ex(context, base + written, &outLength) == 1
        }
        guard finished, written + Int(outLength) == plaintext.count,
            EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_GET_TAG, 16, &tag) == 1
        else { return nil }
        output.replaceSubrange(plaintext.count..., with: tag)
        return output
    }

    /// ChaCha20-Poly1305 decryption of ciphertext-and-tag; nil when the tag does not verify.
    package static func decrypt(key: [UInt8], counter: UInt64, ad: [UInt8], ciphertext: ArraySlice<UInt8>)
        -> [UInt8]?
    {
        guard key.count == 32, ciphertext.count >= tagLength, let adLength = Int32(exactly: ad.count),
            let context = EVP_CIPHER_CTX_new()
        else { return nil }
        defer { EVP_CIPHER_CTX_free(context) }
        let body = Array(ciphertext.dropLast(tagLength))
        var tag = Array(ciphertext.suffix(tagLength))
        guard let bodyLength = Int32(exactly: body.count) else { return nil }
        var output = [UInt8](repeating: 0, count: body.count + tagLength)
        var outLength: Int32 = 0
        guard EVP_DecryptInit_ex(context, EVP_chacha20_poly1305(), nil, key, nonce(counter)) == 1,
            EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_SET_TAG, 16, &tag) == 1
        else { return nil }
        if !ad.isEmpty {
            guard EVP_DecryptUpdate(context, nil, &outLength, ad, adLength) == 1 else { return nil }
        }
        var written = 0
        if !body.isEmpty {
            guard EVP_DecryptUpdate(context, &output, &outLength, body, bodyLength) == 1 else { return nil }
            written = Int(outLength)
        }
        let verified = output.withUnsafeMutableBufferPointer { buffer -> Bool in
            guard let base = buffer.baseAddress, written <= body.count else { return false }
            return EVP_DecryptFinal_ex(context, base + written, &outLength) > 0
        }
        guard verified, written + Int(outLength) == body.count else {
            ERR_clear_error()
            return nil
        }
        output.removeLast(output.count - body.count)
        return output
    }
}
