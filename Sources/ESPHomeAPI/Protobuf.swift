/// Protocol Buffers wire format (proto3), written here for the few messages of the ESPHome native
/// API gattway speaks (docs/ha-bluetooth-proxy.md): varints, zigzag, fixed32/64 and
/// length-delimited fields.
///
/// The reader is meant for bytes from the network: it never traps, refuses overlong varints (more
/// than 10 bytes, or a 10th byte above 1), truncated fields, field number 0, the group wire types
/// (3, 4) and the undefined ones (6, 7); unknown fields are skipped by the message decoders.

/// Why a protobuf payload was refused.
public enum ProtobufError: Error, Equatable, Sendable {
    /// The payload ends inside a field.
    case truncated
    /// A varint longer than 10 bytes or larger than 64 bits.
    case overlongVarint
    /// Wire type 3, 4 (groups, not in proto3), 6 or 7.
    case invalidWireType(UInt8)
    /// Field number 0 or above 2^29 - 1.
    case invalidFieldNumber
    /// A known field with the wrong wire type (e.g. a string field sent as a varint).
    case wrongWireType(field: UInt32)
    /// A known field whose value does not fit what it stands for (an ATT handle above 65535).
    case valueOutOfRange(field: UInt32)
}

/// One field's value as it is on the wire.
public enum ProtobufValue: Sendable, Equatable {
    case varint(UInt64)
    case fixed64(UInt64)
    case lengthDelimited(ArraySlice<UInt8>)
    case fixed32(UInt32)
}

/// Reads the fields of one message in order.
public struct ProtobufReader {
    private let bytes: ArraySlice<UInt8>
    private var index: Int

    public init(_ bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
        self.index = bytes.startIndex
    }

    public init(_ bytes: [UInt8]) { self.init(bytes[...]) }

    /// The next field, or nil at the end of the message.
    public mutating func next() throws(ProtobufError) -> (field: UInt32, value: ProtobufValue)? {
        guard index < bytes.endIndex else { return nil }
        let key = try readVarint()
        let wireType = UInt8(truncatingIfNeeded: key & 7)
        let number = key >> 3
        guard number >= 1, number <= 0x1FFF_FFFF else { throw .invalidFieldNumber }
        let field = UInt32(truncatingIfNeeded: number)
        switch wireType {
        case 0:
            return (field, .varint(try readVarint()))
        case 1:
            return (field, .fixed64(try readLittleEndian(count: 8)))
        case 2:
            let length = try readVarint()
            guard length <= UInt64(bytes.endIndex - index) else { throw .truncated }
            let count = Int(truncatingIfNeeded: length)  // fits: at most the bytes left
            let value = bytes[index..<(index + count)]
            index += count
            return (field, .lengthDelimited(value))
        case 5:
            return (field, .fixed32(UInt32(truncatingIfNeeded: try readLittleEndian(count: 4))))
        default:
            throw .invalidWireType(wireType)
        }
    }

    /// A base-128 varint: at most 10 bytes, the 10th at most 1 (64 bits).
    public mutating func readVarint() throws(ProtobufError) -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            guard index < bytes.endIndex else { throw .truncated }
            let byte = bytes[index]
            index += 1
            if shift == 63 && byte > 1 { throw .overlongVarint }
            result |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return result }
            shift += 7
            if shift > 63 { throw .overlongVarint }
        }
    }

    private mutating func readLittleEndian(count: Int) throws(ProtobufError) -> UInt64 {
        guard bytes.endIndex - index >= count else { throw .truncated }
        var value: UInt64 = 0
        for offset in 0..<count {
            value |= UInt64(bytes[index + offset]) << UInt64(8 * offset)
        }
        index += count
        return value
    }
}

extension ProtobufValue {
    /// A uint32, uint64, int32, bool or enum field: a varint. uint32 keeps the low 32 bits, as
    /// protobuf parsers do.
    public func varint(field: UInt32) throws(ProtobufError) -> UInt64 {
        guard case .varint(let value) = self else { throw .wrongWireType(field: field) }
        return value
    }

    public func uint32(field: UInt32) throws(ProtobufError) -> UInt32 {
        UInt32(truncatingIfNeeded: try varint(field: field))
    }

    public func bool(field: UInt32) throws(ProtobufError) -> Bool {
        try varint(field: field) != 0
    }

    /// A sint32 field (zigzag).
    public func sint32(field: UInt32) throws(ProtobufError) -> Int32 {
        Protobuf.zigzagDecode(UInt32(truncatingIfNeeded: try varint(field: field)))
    }

    public func bytes(field: UInt32) throws(ProtobufError) -> ArraySlice<UInt8> {
        guard case .lengthDelimited(let value) = self else { throw .wrongWireType(field: field) }
        return value
    }

    /// A string field; invalid UTF-8 becomes U+FFFD rather than an error.
    public func string(field: UInt32) throws(ProtobufError) -> String {
        String(decoding: try bytes(field: field), as: UTF8.self)
    }

    public func fixed32(field: UInt32) throws(ProtobufError) -> UInt32 {
        guard case .fixed32(let value) = self else { throw .wrongWireType(field: field) }
        return value
    }
}

/// Zigzag and varint helpers shared by the reader, the writer and the frame codecs.
public enum Protobuf {
    public static func zigzagEncode(_ value: Int32) -> UInt32 {
        UInt32(bitPattern: (value << 1) ^ (value >> 31))
    }

    public static func zigzagDecode(_ value: UInt32) -> Int32 {
        Int32(bitPattern: (value >> 1) ^ (0 &- (value & 1)))
    }

    /// Appends `value` as a base-128 varint.
    public static func appendVarint(_ value: UInt64, to bytes: inout [UInt8]) {
        var rest = value
        while rest >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: rest) | 0x80)
            rest >>= 7
        }
        bytes.append(UInt8(truncatingIfNeeded: rest))
    }
}

/// Builds one message. Proto3 leaves fields at their default value out; the writer does the same
/// unless `always` is set (what the .proto marks as forced, e.g. a raw advertisement's address).
public struct ProtobufWriter {
    public private(set) var bytes: [UInt8] = []

    public init() {}

    private mutating func key(_ field: UInt32, _ wireType: UInt8) {
        Protobuf.appendVarint(UInt64(field) << 3 | UInt64(wireType), to: &bytes)
    }

    public mutating func varint(_ field: UInt32, _ value: UInt64, always: Bool = false) {
        guard value != 0 || always else { return }
        key(field, 0)
        Protobuf.appendVarint(value, to: &bytes)
    }

    public mutating func uint32(_ field: UInt32, _ value: UInt32, always: Bool = false) {
        varint(field, UInt64(value), always: always)
    }

    /// An int32 field: negative values are sign-extended to 64 bits (10 bytes), as protobuf does.
    public mutating func int32(_ field: UInt32, _ value: Int32, always: Bool = false) {
        varint(field, UInt64(bitPattern: Int64(value)), always: always)
    }

    public mutating func sint32(_ field: UInt32, _ value: Int32, always: Bool = false) {
        varint(field, UInt64(Protobuf.zigzagEncode(value)), always: always)
    }

    public mutating func bool(_ field: UInt32, _ value: Bool) {
        varint(field, value ? 1 : 0)
    }

    public mutating func fixed32(_ field: UInt32, _ value: UInt32, always: Bool = false) {
        guard value != 0 || always else { return }
        key(field, 5)
        for shift in stride(from: 0, to: 32, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt32(shift))) }
    }

    public mutating func bytes<C: Collection<UInt8>>(_ field: UInt32, _ value: C, always: Bool = false) {
        guard !value.isEmpty || always else { return }
        key(field, 2)
        Protobuf.appendVarint(UInt64(value.count), to: &bytes)
        bytes.append(contentsOf: value)
    }

    public mutating func string(_ field: UInt32, _ value: String, always: Bool = false) {
        bytes(field, Array(value.utf8), always: always)
    }

    /// A nested message field (always written, even when empty, when `always`).
    public mutating func message(_ field: UInt32, _ value: ProtobufWriter, always: Bool = false) {
        bytes(field, value.bytes, always: always)
    }
}

extension ProtobufError: CustomStringConvertible {
    public var description: String {
        switch self {
        case .truncated: "the payload ends inside a field"
        case .overlongVarint: "a varint longer than 64 bits"
        case .invalidWireType(let type): "wire type \(type) (not in proto3)"
        case .invalidFieldNumber: "field number 0 or above 2^29 - 1"
        case .wrongWireType(let field): "field \(field) with the wrong wire type"
        case .valueOutOfRange(let field): "field \(field) out of range"
        }
    }
}
