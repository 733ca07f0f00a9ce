import Bluetooth

/// The two framings of the ESPHome native API over TCP.
///
/// Plaintext: `0x00`, the payload length (varint), the message type (varint), the protobuf payload.
/// Noise: `0x01`, the frame length (16-bit big endian), the frame. After the handshake a frame is
/// the ChaCha20-Poly1305 encryption of: message type (16-bit BE), payload length (16-bit BE),
/// payload — followed by the 16-byte tag.

/// Why the bytes of a connection were refused.
public enum FrameError: Error, Equatable, Sendable {
    /// The first byte of a frame is not this framing's preamble.
    case badPreamble(UInt8)
    /// A frame announces more than the configured limit.
    case tooLarge(UInt64)
    /// A plaintext header varint runs past 32 bits, or a type above 65535.
    case malformedHeader
}

/// Accumulates a connection's bytes; shared by both decoders. Consumed bytes are dropped in
/// chunks, so the buffer holds at most one partial frame plus one read.
struct ReceiveBuffer {
    private(set) var bytes: [UInt8] = []
    private(set) var start = 0

    var available: Int { bytes.count - start }

    mutating func append<C: Collection<UInt8>>(_ data: C) {
        if start > 0 && (start >= 4096 || start == bytes.count) {
            bytes.removeFirst(start)
            start = 0
        }
        bytes.append(contentsOf: data)
    }

    func byte(at offset: Int) -> UInt8 { bytes[start + offset] }

    func slice(from offset: Int, count: Int) -> ArraySlice<UInt8> {
        bytes[(start + offset)..<(start + offset + count)]
    }

    mutating func consume(_ count: Int) { start += count }
}

/// Splits plaintext frames.
public struct PlaintextFrameDecoder {
    public let maxPayload: Int
    private var buffer = ReceiveBuffer()

    public init(maxPayload: Int) { self.maxPayload = maxPayload }

    public mutating func append<C: Collection<UInt8>>(_ bytes: C) { buffer.append(bytes) }

    /// The next whole frame, nil when more bytes are needed.
    public mutating func next() throws(FrameError) -> (type: UInt16, payload: [UInt8])? {
        guard buffer.available > 0 else { return nil }
        let preamble = buffer.byte(at: 0)
        guard preamble == 0x00 else { throw .badPreamble(preamble) }
        var offset = 1
        guard let length = try varint32(&offset) else { return nil }
        guard length <= UInt64(maxPayload) else { throw .tooLarge(length) }
        guard let type = try varint32(&offset) else { return nil }
        guard type <= 0xFFFF else { throw .malformedHeader }
        let count = Int(truncatingIfNeeded: length)  // fits: at most maxPayload
        guard buffer.available - offset >= count else { return nil }
        let payload = Array(buffer.slice(from: offset, count: count))
        buffer.consume(offset + count)
        return (UInt16(truncatingIfNeeded: type), payload)
    }

    /// A varint of at most 5 bytes and 32 bits; nil when the buffer ends inside it.
    private func varint32(_ offset: inout Int) throws(FrameError) -> UInt64? {
        var value: UInt64 = 0
        for index in 0..<5 {
            guard offset < buffer.available else { return nil }
            let byte = buffer.byte(at: offset)
            offset += 1
            value |= UInt64(byte & 0x7F) << UInt64(7 * index)
            if byte & 0x80 == 0 {
                guard value <= UInt64(UInt32.max) else { throw .malformedHeader }
                return value
            }
        }
        throw .malformedHeader
    }

    /// One plaintext frame.
    public static func encode(_ message: ServerMessage) -> [UInt8] {
        var frame: [UInt8] = [0x00]
        Protobuf.appendVarint(UInt64(message.payload.count), to: &frame)
        Protobuf.appendVarint(UInt64(message.type), to: &frame)
        frame += message.payload
        return frame
    }
}

/// Splits Noise frames (the 3-byte header and the frame bytes, not yet decrypted).
public struct NoiseFrameDecoder {
    public let maxFrame: Int
    private var buffer = ReceiveBuffer()

    public init(maxFrame: Int) { self.maxFrame = min(maxFrame, 0xFFFF) }

    public mutating func append<C: Collection<UInt8>>(_ bytes: C) { buffer.append(bytes) }

    public mutating func next() throws(FrameError) -> [UInt8]? {
        guard buffer.available > 0 else { return nil }
        let preamble = buffer.byte(at: 0)
        guard preamble == 0x01 else { throw .badPreamble(preamble) }
        guard buffer.available >= 3 else { return nil }
        let length = Int(buffer.byte(at: 1)) << 8 | Int(buffer.byte(at: 2))
        guard length <= maxFrame else { throw .tooLarge(UInt64(length)) }
        guard buffer.available - 3 >= length else { return nil }
        let frame = Array(buffer.slice(from: 3, count: length))
        buffer.consume(3 + length)
        return frame
    }

    /// One Noise frame around `body`; nil when it is longer than 65535 bytes.
    public static func encode(_ body: [UInt8]) -> [UInt8]? {
        guard body.count <= 0xFFFF else { return nil }
        return [0x01, UInt8(truncatingIfNeeded: body.count >> 8), UInt8(truncatingIfNeeded: body.count)] + body
    }
}

extension FrameError: CustomStringConvertible {
    public var description: String {
        switch self {
        case .badPreamble(let byte):
            switch byte {
            case 0x00: "a plaintext frame (0x00) where a Noise frame (0x01) was expected"
            case 0x01:
                "a Noise frame (0x01) where a plaintext frame (0x00) was expected: the client has an encryption key, this server none"
            default:
                "a frame starting with 0x\(Hex.encode([byte], uppercase: true)), neither framing's first byte (0x00 plaintext, 0x01 Noise)"
            }
        case .tooLarge(let size): "a frame of \(size) bytes, over the limit"
        case .malformedHeader: "a malformed frame header"
        }
    }
}
