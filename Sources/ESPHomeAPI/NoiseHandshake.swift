/// The responder side of Noise_NNpsk0_25519_ChaChaPoly_SHA256 (the Noise Protocol Framework,
/// revision 34), as the ESPHome native API uses it: prologue "NoiseAPIInit\0\0", the pre-shared key
/// is the device's 32-byte `encryption_key`, no static keys.
///
///     -> psk, e        (the client's message: its ephemeral key and a tag over an empty payload)
///     <- e, ee         (ours: our ephemeral key and a tag over an empty payload)
///
/// A client with another key fails the tag check of its first message: ``readClientMessage(_:)``
/// returns nil and the server answers with the rejection frame (docs/ha-bluetooth-proxy.md).
package struct NoiseHandshake {
    package static let protocolName = Array("Noise_NNpsk0_25519_ChaChaPoly_SHA256".utf8)
    package static let prologue: [UInt8] = Array("NoiseAPIInit".utf8) + [0, 0]

    private var chainingKey: [UInt8]
    private var hash: [UInt8]
    private var key: [UInt8]?
    private var nonce: UInt64 = 0
    private let psk: [UInt8]
    private let ephemeralPrivate: [UInt8]
    private var remoteEphemeral: [UInt8] = []

    /// - Parameters:
    ///   - psk: the 32-byte pre-shared key.
    ///   - ephemeralPrivateKey: fixed only in tests (vectors); random otherwise.
    package init?(psk: [UInt8], ephemeralPrivateKey: [UInt8]? = nil) {
        guard psk.count == 32, let ephemeral = ephemeralPrivateKey ?? NoiseCrypto.randomKey(), ephemeral.count == 32
        else { return nil }
        self.psk = psk
        self.ephemeralPrivate = ephemeral
        // A protocol name longer than HASHLEN is hashed to form the initial h.
        hash = NoiseCrypto.sha256(Self.protocolName)
        chainingKey = hash
        mixHash(Self.prologue)
    }

    private mutating func mixHash<C: Collection<UInt8>>(_ data: C) {
        hash = NoiseCrypto.sha256(hash + Array(data))
    }

    private mutating func mixKey(_ input: [UInt8]) {
        let outputs = NoiseCrypto.hkdf(chainingKey: chainingKey, input: input, outputs: 2)
        chainingKey = outputs[0]
        key = outputs[1]
        nonce = 0
    }

    private mutating func mixKeyAndHash(_ input: [UInt8]) {
        let outputs = NoiseCrypto.hkdf(chainingKey: chainingKey, input: input, outputs: 3)
        chainingKey = outputs[0]
        mixHash(outputs[1])
        key = outputs[2]
        nonce = 0
    }

    /// EncryptAndHash of the Noise framework: ``cipherAndHash(_:encrypting:)`` one way.
    private mutating func encryptAndHash(_ plaintext: [UInt8]) -> [UInt8]? {
        cipherAndHash(plaintext[...], encrypting: true)
    }

    /// DecryptAndHash of the Noise framework: ``cipherAndHash(_:encrypting:)`` the other way.
    private mutating func decryptAndHash(_ ciphertext: ArraySlice<UInt8>) -> [UInt8]? {
        cipherAndHash(ciphertext, encrypting: false)
    }

    /// Without a key yet, `input` passes through into the hash unchanged; with one, it is
    /// encrypted or decrypted under the key and the next nonce, and the ciphertext (the output
    /// when encrypting, the input when decrypting) goes into the hash. Nil when the tag fails.
    private mutating func cipherAndHash(_ input: ArraySlice<UInt8>, encrypting: Bool) -> [UInt8]? {
        guard let key else {
            mixHash(input)
            return Array(input)
        }
        guard
            let output = encrypting
                ? NoiseCrypto.encrypt(key: key, counter: nonce, ad: hash, plaintext: Array(input))
                : NoiseCrypto.decrypt(key: key, counter: nonce, ad: hash, ciphertext: input)
        else { return nil }
        nonce &+= 1
        if encrypting { mixHash(output) } else { mixHash(input) }
        return output
    }

    /// Reads the client's `psk, e` message; nil when it is short or its tag fails (a wrong key).
    /// Returns the client's (normally empty) payload.
    package mutating func readClientMessage(_ message: ArraySlice<UInt8>) -> [UInt8]? {
        guard message.count >= 32 + NoiseCrypto.tagLength else { return nil }
        mixKeyAndHash(psk)
        let ephemeral = Array(message.prefix(32))
        remoteEphemeral = ephemeral
        mixHash(ephemeral)
        mixKey(ephemeral)
        return decryptAndHash(message.dropFirst(32))
    }

    // MARK: The initiator (gattway doctor's probe, tests)

    /// Writes the client's `psk, e` message (an empty payload).
    package mutating func writeClientMessage() -> [UInt8]? {
        guard let publicKey = NoiseCrypto.x25519PublicKey(privateKey: ephemeralPrivate) else { return nil }
        mixKeyAndHash(psk)
        mixHash(publicKey)
        mixKey(publicKey)
        guard let tag = encryptAndHash([]) else { return nil }
        return publicKey + tag
    }

    /// Reads the server's `e, ee` message and splits: `send` encrypts the client's frames,
    /// `receive` decrypts the server's; nil when the message does not authenticate.
    package mutating func readServerMessage(_ message: ArraySlice<UInt8>) -> (send: NoiseCipher, receive: NoiseCipher)?
    {
        guard message.count >= 32 + NoiseCrypto.tagLength else { return nil }
        let ephemeral = Array(message.prefix(32))
        mixHash(ephemeral)
        mixKey(ephemeral)
        guard let shared = NoiseCrypto.x25519(privateKey: ephemeralPrivate, peerPublicKey: ephemeral) else {
            return nil
        }
        mixKey(shared)
        guard decryptAndHash(message.dropFirst(32)) != nil else { return nil }
        let keys = NoiseCrypto.hkdf(chainingKey: chainingKey, input: [], outputs: 2)
        return (NoiseCipher(key: keys[0]), NoiseCipher(key: keys[1]))
    }

    // MARK: The responder

    /// Writes our `e, ee` message and splits: returns the message and the two transport ciphers
    /// (`receive` decrypts the client's frames, `send` encrypts ours); nil if a primitive failed
    /// (e.g. a small-order client key).
    package mutating func writeServerMessage() -> (message: [UInt8], receive: NoiseCipher, send: NoiseCipher)? {
        guard let publicKey = NoiseCrypto.x25519PublicKey(privateKey: ephemeralPrivate),
            let shared = NoiseCrypto.x25519(privateKey: ephemeralPrivate, peerPublicKey: remoteEphemeral)
        else { return nil }
        mixHash(publicKey)
        mixKey(publicKey)
        mixKey(shared)
        guard let tag = encryptAndHash([]) else { return nil }
        let keys = NoiseCrypto.hkdf(chainingKey: chainingKey, input: [], outputs: 2)
        return (publicKey + tag, NoiseCipher(key: keys[0]), NoiseCipher(key: keys[1]))
    }
}

/// A Noise transport CipherState: a key and a counting nonce, no associated data.
package struct NoiseCipher {
    private let key: [UInt8]
    private var nonce: UInt64 = 0

    package init(key: [UInt8]) { self.key = key }

    /// nil once the nonce is used up (2^64 - 1 is reserved) or when libcrypto fails.
    package mutating func encrypt(_ plaintext: [UInt8]) -> [UInt8]? {
        guard nonce < .max, let result = NoiseCrypto.encrypt(key: key, counter: nonce, ad: [], plaintext: plaintext)
        else { return nil }
        nonce += 1
        return result
    }

    /// nil when the tag does not verify (a corrupt or forged frame).
    package mutating func decrypt(_ ciphertext: ArraySlice<UInt8>) -> [UInt8]? {
        guard nonce < .max, let result = NoiseCrypto.decrypt(key: key, counter: nonce, ad: [], ciphertext: ciphertext)
        else { return nil }
        nonce += 1
        return result
    }
}
