import LocalSystem

#if canImport(Glibc)
    import Glibc
#endif

/// The Noise pre-shared key as ESPHome exchanges it: 32 bytes, written as the 44 characters of
/// their padded standard base64 (in `encryption_key`, in NoiseEncryptionSetKeyRequest, in the
/// stored file).
public enum APIKey {
    public static let length = 32
    /// Characters of the base64 of a key: 44, the last one "=".
    public static let textLength = 44
    /// The key an unprovisioned device accepts (aioesphomeapi's `ZERO_NOISE_PSK`: 32 zero bytes),
    /// so the real key can be set without being sent in the clear. Never a key itself: a set-key
    /// request with it is refused, as ESPHome refuses it.
    public static let zero = [UInt8](repeating: 0, count: 32)

    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// The key in `text`: exactly 44 characters of standard base64 ending in one "=" (a trailing
    /// newline allowed, as in the stored file); nil for anything else.
    public static func decode<C: Collection<UInt8>>(_ text: C) -> [UInt8]? {
        var characters = Array(text.prefix(textLength + 2))
        if characters.last == UInt8(ascii: "\n") { characters.removeLast() }
        guard characters.count == textLength, characters[textLength - 1] == UInt8(ascii: "=") else { return nil }
        var key: [UInt8] = []
        key.reserveCapacity(length)
        var accumulator: UInt32 = 0
        var bits = 0
        for character in characters.dropLast() {
            guard let index = alphabet.firstIndex(of: character) else { return nil }
            accumulator = accumulator << 6 | UInt32(index)
            bits += 6
            if bits >= 8 {
                bits -= 8
                key.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        // 43 characters carry 258 bits: the last 2 must be zero (canonical encoding only).
        guard key.count == length, accumulator & ((1 << UInt32(bits)) - 1) == 0 else { return nil }
        return key
    }

    /// The 44 characters of `key`'s base64.
    public static func encode(_ key: [UInt8]) -> String {
        var out: [UInt8] = []
        var index = 0
        while index < key.count {
            let group = key[index..<min(index + 3, key.count)]
            let value = group.enumerated().reduce(UInt32(0)) { $0 | UInt32($1.element) << (16 - 8 * UInt32($1.offset)) }
            for position in 0...3 {
                out.append(
                    position <= group.count
                        ? alphabet[Int(value >> UInt32(18 - 6 * position) & 0x3F)] : UInt8(ascii: "="))
            }
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// Where the key a client set (keyless adoption, docs/ha-bluetooth-proxy.md) is kept:
/// `esphome-api.key` in the state directory, the key's base64 and a newline, mode 0600,
/// written atomically (``LocalFile/write(_:to:mode:)``). Read at start; never trusted: a file
/// that is not one key is reported and ignored (the proxy is then unprovisioned).
public struct APIKeyStore: Sendable {
    public static let fileName = "esphome-api.key"
    /// The largest file looked at (a key and its newline take 45 bytes).
    static let maxFileBytes = 64

    public let path: String

    public init(directory: String) {
        path = directory + "/" + Self.fileName
    }

    /// The stored key (nil: none) and what is wrong with the file, if anything (no key material).
    public func load() -> (key: [UInt8]?, problem: String?) {
        guard LocalFile.exists(path) else { return (nil, nil) }
        var status = stat()
        guard stat(path, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG, status.st_size <= Self.maxFileBytes
        else {
            return (nil, "\(path) is not a regular file of at most \(Self.maxFileBytes) bytes: ignored")
        }
        guard let bytes = try? LocalFile.contents(path) else { return (nil, "cannot read \(path): ignored") }
        guard bytes.count <= Self.maxFileBytes, let key = APIKey.decode(bytes), key != APIKey.zero else {
            return (nil, "\(path) does not hold one encryption key (44 characters of base64): ignored")
        }
        if status.st_mode & 0o077 != 0 {
            return (
                key, "\(path) is readable by others (mode \(String(status.st_mode & 0o777, radix: 8))): chmod 600 it"
            )
        }
        return (key, nil)
    }

    /// Stores `key` (replacing the one stored).
    public func save(_ key: [UInt8]) throws(LocalFileError) {
        // A leftover temporary file keeps its mode through O_TRUNC: start from none.
        unlink(path + ".tmp")
        try LocalFile.write(APIKey.encode(key) + "\n", to: path, mode: 0o600)
    }

    /// Forgets the stored key; true when there was one.
    @discardableResult
    public func forget() throws(LocalFileError) -> Bool {
        guard unlink(path) == 0 else {
            if errno == ENOENT { return false }
            throw LocalFileError("cannot remove \(path)", errno: errno)
        }
        return true
    }
}
