import Testing

@testable import Gateway

/// The queue file's record codec on bytes. The expected records were computed independently
/// (Python's `struct` and `zlib.crc32`): a queue file written by an earlier version must still load.
@Suite("Store-and-forward: the queue file's records")
struct QueueRecordTests {
    static let message = QueuedMessage(
        message: MQTTOutboundMessage(
            topic: "a/b", payload: Array("{}".utf8), qos: 1, retain: true, correlationData: [0xDE, 0xAD]),
        capturedAt: 0x0102_0304_0506_0708, sequence: 5)

    /// `message` as a record: length 39, CRC, then type 1, sequence, capture time, qos, retain,
    /// topic, correlation flag and data, payload.
    static let messageRecord: [UInt8] = [
        0x27, 0x00, 0x00, 0x00, 0xA8, 0x0D, 0x6E, 0x2F,
        0x01, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,
        0x01, 0x01, 0x03, 0x00, 0x00, 0x00, 0x61, 0x2F, 0x62, 0x01, 0x02, 0x00, 0x00, 0x00, 0xDE, 0xAD,
        0x02, 0x00, 0x00, 0x00, 0x7B, 0x7D,
    ]

    @Test(
        "a message encodes to the file's bytes and decodes back to the same message, with and without correlation data")
    func messageRoundTrip() throws {
        var record: [UInt8] = [0xFF]  // appended after what the buffer holds
        QueueRecord.encode(Self.message, into: &record)
        #expect(Array(record.dropFirst()) == Self.messageRecord)
        #expect(QueueRecord.decodeRecord(Self.messageRecord[...]) == Self.message)

        var plain = Self.message
        plain.message.correlationData = nil
        plain.message.retain = false
        plain.message.qos = 2
        plain.message.topic = "gattway/ü"
        var bytes: [UInt8] = []
        QueueRecord.encode(plain, into: &bytes)
        #expect(QueueRecord.decodeRecord(bytes[...]) == plain)
        let layout = try #require(QueueRecord.Layout(bytes.dropFirst(QueueRecord.headerLength)))
        #expect(layout.size == plain.size && layout.correlation == nil)
    }

    @Test("a removal mark is 17 bytes, says the sequence below which messages are gone, and is no message")
    func removalMark() {
        var record: [UInt8] = []
        QueueRecord.encodeRemovalMark(below: 0x0102, into: &record)
        #expect(
            record == [
                0x09, 0x00, 0x00, 0x00, 0xE1, 0x30, 0xAD, 0x2C, 0x02, 0x02, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
            ])
        #expect(record.count == QueueRecord.removalMarkLength)
        guard case .removalMark(let below)? = QueueRecord.Body(record.dropFirst(QueueRecord.headerLength)) else {
            Issue.record("not read as a removal mark")
            return
        }
        #expect(below == 0x0102)
        #expect(QueueRecord.decodeRecord(record[...]) == nil)
        #expect(QueueRecord.Body(record.dropFirst(QueueRecord.headerLength).dropLast()) == nil, "a short mark")
    }

    @Test("every truncated record is rejected")
    func truncated() {
        for length in 0..<Self.messageRecord.count {
            #expect(QueueRecord.decodeRecord(Self.messageRecord.prefix(length)) == nil, "\(length) bytes")
        }
    }

    @Test("a record whose CRC or length does not hold is rejected, as is a body with bytes after its payload")
    func damaged() {
        for index in QueueRecord.headerLength..<Self.messageRecord.count {
            var flipped = Self.messageRecord
            flipped[index] ^= 0x10
            #expect(QueueRecord.decodeRecord(flipped[...]) == nil, "byte \(index) flipped")
        }
        var checksum = Self.messageRecord
        checksum[4] ^= 1
        #expect(QueueRecord.decodeRecord(checksum[...]) == nil)
        var longer = Self.messageRecord
        longer[0] += 1
        #expect(QueueRecord.decodeRecord(longer[...]) == nil)
        // A valid frame around a body with a trailing byte: the CRC holds, the layout does not.
        let trailing = QueueRecord.frame(Array(Self.messageRecord.dropFirst(QueueRecord.headerLength)) + [0])
        #expect(QueueRecord.decodeRecord(trailing[...]) == nil)
        #expect(QueueRecord.Body(trailing.dropFirst(QueueRecord.headerLength)) == nil)
        // An unknown record type under a good CRC.
        #expect(QueueRecord.Body(QueueRecord.frame([3, 0]).dropFirst(QueueRecord.headerLength)) == nil)
    }

    @Test("frame puts the length and CRC of any body in front of it, as the queue writes them")
    func frame() {
        #expect(QueueRecord.frame(Array(Self.messageRecord.dropFirst(QueueRecord.headerLength))) == Self.messageRecord)
    }
}
