/// Reads structure out of a fuzzer's bytes (in the manner of libFuzzer's FuzzedDataProvider):
/// every read takes bytes from the front and never fails — past the end it returns zeros and
/// empty values — so any byte string is a valid input and small mutations stay meaningful.
public struct FuzzInput {
    public private(set) var bytes: [UInt8]
    public private(set) var offset = 0

    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    public var isEmpty: Bool { offset >= bytes.count }
    public var remaining: Int { max(0, bytes.count - offset) }

    public mutating func byte() -> UInt8 {
        guard offset < bytes.count else { return 0 }
        defer { offset += 1 }
        return bytes[offset]
    }

    public mutating func bool() -> Bool { byte() & 1 == 1 }

    public mutating func uint16() -> UInt16 { UInt16(byte()) | UInt16(byte()) << 8 }

    public mutating func uint32() -> UInt32 { UInt32(uint16()) | UInt32(uint16()) << 16 }

    public mutating func uint64() -> UInt64 { UInt64(uint32()) | UInt64(uint32()) << 32 }

    /// A number in `0..<count` (0 when count is 0).
    public mutating func index(_ count: Int) -> Int {
        guard count > 0 else { return 0 }
        return Int(uint16()) % count
    }

    /// One of `choices` (which must not be empty).
    public mutating func pick<T>(_ choices: [T]) -> T { choices[index(choices.count)] }

    /// Up to `count` bytes.
    public mutating func bytes(_ count: Int) -> [UInt8] {
        let end = min(bytes.count, offset + max(0, count))
        defer { offset = max(offset, end) }
        return offset < end ? Array(bytes[offset..<end]) : []
    }

    /// A length-prefixed byte string (one length byte, at most `limit`).
    public mutating func chunk(limit: Int = 255) -> [UInt8] { bytes(Int(byte()) % (limit + 1)) }

    /// A length-prefixed string, decoded as UTF-8 with replacement (as the product decodes text).
    public mutating func string(limit: Int = 255) -> String { String(decoding: chunk(limit: limit), as: UTF8.self) }

    /// Everything not read yet.
    public mutating func rest() -> [UInt8] {
        defer { offset = bytes.count }
        return offset < bytes.count ? Array(bytes[offset...]) : []
    }
}

/// Writes inputs in ``FuzzInput``'s encoding, to turn real fixtures into seeds.
public struct FuzzInputBuilder {
    public private(set) var bytes: [UInt8] = []
    public init() {}
    public mutating func byte(_ value: UInt8) { bytes.append(value) }
    public mutating func bool(_ value: Bool) { bytes.append(value ? 1 : 0) }
    public mutating func uint16(_ value: UInt16) {
        bytes += [UInt8(truncatingIfNeeded: value), UInt8(truncatingIfNeeded: value >> 8)]
    }
    public mutating func index(_ value: Int) { uint16(UInt16(clamping: value)) }
    public mutating func chunk(_ value: [UInt8]) {
        let part = value.prefix(255)
        bytes.append(UInt8(part.count))
        bytes += part
    }
    public mutating func string(_ value: String) { chunk(Array(value.utf8)) }
    public mutating func rest(_ value: [UInt8]) { bytes += value }
}
