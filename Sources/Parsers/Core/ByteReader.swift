import Bluetooth

/// Bounds-checked reads from a payload: every read either returns a value or throws
/// `too_short`, so no parser indexes past the end of untrusted bytes.
///
/// A reader holds a reference to the caller's array (no copy) and a cursor.
public struct ByteReader: Sendable {
    public let bytes: [UInt8]
    /// Index of the next byte to read.
    public var offset: Int
    /// One past the last readable byte.
    public let end: Int
    /// Named in `too_short` errors, e.g. "BTHome object 0x02".
    let what: String

    public init(_ bytes: [UInt8], from offset: Int = 0, what: String = "payload") {
        self.init(bytes, from: offset, to: bytes.count, what: what)
    }

    /// A reader over `bytes[offset..<end]` (clamped to the array).
    public init(_ bytes: [UInt8], from offset: Int, to end: Int, what: String = "payload") {
        self.bytes = bytes
        self.end = min(max(end, 0), bytes.count)
        self.offset = min(max(offset, 0), self.end)
        self.what = what
    }

    /// Bytes left to read.
    @inlinable public var remaining: Int { end - offset }
    @inlinable public var isAtEnd: Bool { offset >= end }

    @inline(__always)
    mutating func need(_ count: Int) throws(ParseError) {
        guard count >= 0, remaining >= count else {
            throw ParseError.tooShort(what, need: offset + count, got: end)
        }
    }

    public mutating func u8() throws(ParseError) -> UInt8 {
        try need(1)
        defer { offset += 1 }
        return bytes[offset]
    }

    public mutating func s8() throws(ParseError) -> Int8 { Int8(bitPattern: try u8()) }

    /// An unsigned little-endian integer of `size` bytes (1…8).
    public mutating func uintLE(_ size: Int) throws(ParseError) -> UInt64 {
        try need(size)
        var value: UInt64 = 0
        var index = offset + size - 1
        while index >= offset {
            value = value << 8 | UInt64(bytes[index])
            index -= 1
        }
        offset += size
        return value
    }

    /// An unsigned big-endian integer of `size` bytes (1…8).
    public mutating func uintBE(_ size: Int) throws(ParseError) -> UInt64 {
        try need(size)
        var value: UInt64 = 0
        for index in offset..<(offset + size) { value = value << 8 | UInt64(bytes[index]) }
        offset += size
        return value
    }

    /// Six octets as a device address in the order written (most significant first), without
    /// copying them into an array.
    public mutating func address() throws(ParseError) -> BluetoothAddress {
        BluetoothAddress(rawValue: try uintBE(6))
    }

    /// Six octets as a device address, least significant first (as BLE sends a MAC).
    public mutating func addressLE() throws(ParseError) -> BluetoothAddress {
        BluetoothAddress(rawValue: try uintLE(6))
    }

    /// A two's-complement little-endian integer of `size` bytes.
    public mutating func intLE(_ size: Int) throws(ParseError) -> Int64 {
        signExtend(try uintLE(size), bits: size * 8)
    }

    /// A two's-complement big-endian integer of `size` bytes.
    public mutating func intBE(_ size: Int) throws(ParseError) -> Int64 {
        signExtend(try uintBE(size), bits: size * 8)
    }

    public mutating func u16le() throws(ParseError) -> UInt16 { UInt16(truncatingIfNeeded: try uintLE(2)) }
    public mutating func s16le() throws(ParseError) -> Int16 { Int16(truncatingIfNeeded: try uintLE(2)) }
    public mutating func u16be() throws(ParseError) -> UInt16 { UInt16(truncatingIfNeeded: try uintBE(2)) }
    public mutating func s16be() throws(ParseError) -> Int16 { Int16(truncatingIfNeeded: try uintBE(2)) }
    public mutating func u24le() throws(ParseError) -> UInt32 { UInt32(truncatingIfNeeded: try uintLE(3)) }
    public mutating func u32le() throws(ParseError) -> UInt32 { UInt32(truncatingIfNeeded: try uintLE(4)) }
    public mutating func u32be() throws(ParseError) -> UInt32 { UInt32(truncatingIfNeeded: try uintBE(4)) }

    /// `count` raw bytes (a copy).
    public mutating func bytes(_ count: Int) throws(ParseError) -> [UInt8] {
        try need(count)
        defer { offset += count }
        return Array(bytes[offset..<(offset + count)])
    }

    /// Everything not read yet (a copy).
    public mutating func rest() -> [UInt8] {
        defer { offset = end }
        return Array(bytes[offset..<end])
    }

    public mutating func skip(_ count: Int) throws(ParseError) {
        try need(count)
        offset += count
    }
}

@inline(__always)
func signExtend(_ value: UInt64, bits: Int) -> Int64 {
    guard bits > 0, bits < 64 else { return Int64(bitPattern: value) }
    let shift = UInt64(64 - bits)
    return Int64(bitPattern: value << shift) >> Int64(shift)
}

/// `raw / 10^decimals`, correctly rounded, so 2345 with 2 decimals is exactly the double 23.45.
@inline(__always)
func decimal<I: BinaryInteger>(_ raw: I, _ decimals: Int) -> Double {
    Double(raw) / powersOfTen[min(max(decimals, 0), powersOfTen.count - 1)]
}

let powersOfTen: [Double] = [1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9]

/// Rounds to `decimals` places, for factors such as 0.005 that are not powers of ten.
@inline(__always)
func rounded(_ value: Double, _ decimals: Int) -> Double {
    let scale = powersOfTen[min(max(decimals, 0), powersOfTen.count - 1)]
    return (value * scale).rounded() / scale
}
