/// The records of the store-and-forward queue file, as bytes: encoding and decoding only, no I/O.
///
/// Format (little endian): `[length u32][crc32 u32][body]`, where the body is either a message
/// (`1`, sequence u64, captured-at i64, qos u8, retain u8, topic, a correlation flag u8 and, when
/// it is 1, the correlation data, payload — topic, correlation data and payload each with a u32
/// length) or a removal mark (`2`, sequence u64: every message below it is gone). `length` counts
/// the body, the CRC-32 (``CRC32``) is of the body. `package`: the store-and-forward fuzz target
/// frames fuzzed bodies with it.
package enum QueueRecord {
    /// Bytes of a record's header: length and CRC.
    package static let headerLength = 8

    /// Bytes of a removal mark record (header and body).
    static let removalMarkLength = headerLength + 9

    /// The header of a record: the length of its body and the body's CRC.
    struct Header {
        var length: Int
        var checksum: UInt32

        /// The header at index `start` of `bytes` (which holds at least ``headerLength`` from there).
        init(_ bytes: ArraySlice<UInt8>, at start: Int) {
            length = Int(QueueRecord.u32(bytes, start))
            checksum = QueueRecord.u32(bytes, start + 4)
        }
    }

    /// What a body whose CRC holds says.
    enum Body {
        /// A message, with where its fields are.
        case message(Layout)
        /// Every message below the sequence is gone.
        case removalMark(below: UInt64)

        /// Nil unless `body` is exactly one well-formed message or removal mark.
        init?(_ body: ArraySlice<UInt8>) {
            switch body.first {
            case 1:
                guard let layout = Layout(body) else { return nil }
                self = .message(layout)
            case 2:
                guard body.count == 9 else { return nil }
                self = .removalMark(below: QueueRecord.u64(body, body.startIndex + 1))
            default:
                return nil
            }
        }
    }

    /// Where the fields of a message record's body are (the body starts with its type byte).
    struct Layout {
        var sequence: UInt64
        var capturedAt: Int64
        var qos: UInt8
        var retain: Bool
        var topic: Range<Int>
        var correlation: Range<Int>?
        var payload: Range<Int>

        /// ``QueuedMessage/size``.
        var size: Int { topic.count + payload.count + (correlation?.count ?? 0) }

        /// Nil unless `body` is exactly one well-formed message.
        init?(_ body: ArraySlice<UInt8>) {
            var offset = body.startIndex + 1
            func take(_ count: Int) -> Range<Int>? {
                guard count >= 0, body.endIndex - offset >= count else { return nil }
                defer { offset += count }
                return offset..<(offset + count)
            }
            func field() -> Range<Int>? {
                guard let length = take(4) else { return nil }
                return take(Int(QueueRecord.u32(body, length.lowerBound)))
            }
            guard body.first == 1, let sequence = take(8), let captured = take(8), let flags = take(2),
                let topic = field(), let hasCorrelation = take(1)
            else { return nil }
            var correlation: Range<Int>?
            if body[hasCorrelation.lowerBound] == 1 {
                guard let data = field() else { return nil }
                correlation = data
            }
            guard let payload = field(), offset == body.endIndex else { return nil }
            self.sequence = QueueRecord.u64(body, sequence.lowerBound)
            self.capturedAt = Int64(bitPattern: QueueRecord.u64(body, captured.lowerBound))
            self.qos = body[flags.lowerBound]
            self.retain = body[flags.lowerBound + 1] == 1
            self.topic = topic
            self.correlation = correlation
            self.payload = payload
        }
    }

    // MARK: Encoding

    /// Appends the record of `queued` to `buffer`.
    static func encode(_ queued: QueuedMessage, into buffer: inout [UInt8]) {
        appendRecord(&buffer) { body in
            body.append(1)
            append(queued.sequence, &body)
            append(UInt64(bitPattern: queued.capturedAt), &body)
            body.append(UInt8(truncatingIfNeeded: queued.message.qos))
            body.append(queued.message.retain ? 1 : 0)
            appendField(Array(queued.message.topic.utf8), &body)
            if let correlation = queued.message.correlationData {
                body.append(1)
                appendField(correlation, &body)
            } else {
                body.append(0)
            }
            appendField(queued.message.payload, &body)
        }
    }

    /// Appends a removal mark (every message below `sequence` is gone) to `buffer`.
    static func encodeRemovalMark(below sequence: UInt64, into buffer: inout [UInt8]) {
        appendRecord(&buffer) { body in
            body.append(2)
            append(sequence, &body)
        }
    }

    /// `body` with a header: any bytes as a record whose length and CRC hold.
    package static func frame(_ body: [UInt8]) -> [UInt8] {
        var record: [UInt8] = []
        appendRecord(&record) { $0.append(contentsOf: body) }
        return record
    }

    // MARK: Decoding

    /// The message of a body (``Body``); nil for a removal mark or a malformed body.
    static func decode(_ body: ArraySlice<UInt8>) -> QueuedMessage? {
        guard let layout = Layout(body) else { return nil }
        let message = MQTTOutboundMessage(
            topic: String(decoding: body[layout.topic], as: UTF8.self), payload: Array(body[layout.payload]),
            qos: Int(layout.qos), retain: layout.retain, correlationData: layout.correlation.map { Array(body[$0]) })
        return QueuedMessage(message: message, capturedAt: layout.capturedAt, sequence: layout.sequence)
    }

    /// The message of a whole record (header and body) whose length and CRC hold; nil otherwise.
    static func decodeRecord(_ record: ArraySlice<UInt8>) -> QueuedMessage? {
        guard record.count > headerLength else { return nil }
        let header = Header(record, at: record.startIndex)
        let body = record.dropFirst(headerLength)
        guard header.length == body.count, CRC32.checksum(body) == header.checksum else { return nil }
        return decode(body)
    }

    // MARK: Bytes

    private static func appendRecord(_ buffer: inout [UInt8], _ body: (inout [UInt8]) -> Void) {
        let start = buffer.count
        buffer.append(contentsOf: [0, 0, 0, 0, 0, 0, 0, 0])
        body(&buffer)
        let length = buffer.count - start - headerLength
        let checksum = CRC32.checksum(buffer[(start + headerLength)...])
        for shift in 0..<4 {
            buffer[start + shift] = UInt8(truncatingIfNeeded: UInt32(length) >> (8 * shift))
            buffer[start + 4 + shift] = UInt8(truncatingIfNeeded: checksum >> (8 * shift))
        }
    }

    private static func append(_ value: UInt64, _ buffer: inout [UInt8]) {
        for shift in 0..<8 { buffer.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(shift)))) }
    }

    private static func appendField(_ bytes: [UInt8], _ buffer: inout [UInt8]) {
        for shift in 0..<4 { buffer.append(UInt8(truncatingIfNeeded: UInt32(bytes.count) >> (8 * UInt32(shift)))) }
        buffer.append(contentsOf: bytes)
    }

    /// The u32 at index `offset` of `bytes` (an index of the slice, not relative to its start).
    static func u32(_ bytes: ArraySlice<UInt8>, _ offset: Int) -> UInt32 {
        (0..<4).reduce(0) { $0 | UInt32(bytes[offset + $1]) << (8 * UInt32($1)) }
    }

    static func u64(_ bytes: ArraySlice<UInt8>, _ offset: Int) -> UInt64 {
        (0..<8).reduce(0) { $0 | UInt64(bytes[offset + $1]) << (8 * UInt64($1)) }
    }
}
