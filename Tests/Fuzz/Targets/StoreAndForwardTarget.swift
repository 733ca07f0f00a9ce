import Gateway
import Glibc

extension FuzzTargets {
    /// Arbitrary bytes as the store-and-forward queue file (`state_directory/queue`): what a
    /// crash, a full disk or a hand edit leaves there. The bytes become the file, a ``DiskQueue``
    /// opens it, everything is read back, a message is appended (and, on some inputs, a 1 MB one
    /// that forces a compaction), and the file is opened again.
    ///
    /// Properties: no trap, no hang; the discarded tail is at most the file; everything kept
    /// reads back (no record the open accepted fails its CRC or layout later); the bytes the
    /// queue counts are the sum of what it reads back; an appended message reads back as
    /// written; and a file the queue wrote itself reopens with nothing discarded and the same
    /// messages.
    ///
    /// Encoding: a mode byte. Bit 0 clear: the rest is the file. Bit 0 set: the rest is a list
    /// of records framed with a valid length and CRC by the target (``QueueFileRecords``), so
    /// record bodies are fuzzed past the checksum. Bits 1, 4, 5 and 6 all set: the compaction step
    /// (1 MB written and checksummed — with coverage tracing, most of a run's time when an eighth
    /// of the inputs did it; now a sixteenth). Bit 2: the
    /// appended message carries correlation data.
    static let storeAndForward = FuzzTarget(
        name: "store-and-forward",
        summary: "arbitrary bytes as the store-and-forward queue file: open, replay, append, compact, reopen",
        seeds: { QueueFileRecords.seeds },
        run: { bytes in
            var input = FuzzInput(bytes)
            let mode = input.byte()
            let file = mode & 1 != 0 ? QueueFileRecords.frame(&input) : input.rest()
            let path = QueueFileRecords.newPath()
            defer {
                unlink(path)
                unlink(path + ".tmp")
            }
            guard QueueFileRecords.write(file, to: path) else { return }
            let limits = DiskQueue.Limits(maxMessages: 1000, maxBytes: 4 << 20, maxAge: 1e6)
            guard let queue = try? DiskQueue(path: path, limits: limits) else { return }
            fuzzProperty(
                queue.discardedBytes >= 0 && queue.discardedBytes <= file.count,
                "discarded \(queue.discardedBytes) bytes of a \(file.count)-byte file")
            let kept = queue.oldest()
            fuzzProperty(
                kept.count == queue.count && queue.drops.unreadable == 0,
                "\(queue.count) messages kept at open, \(kept.count) read back, \(queue.drops.unreadable) unreadable")
            // What it holds is bounded by the file (a decoded topic may differ in size: invalid
            // UTF-8 is replaced, so the count is of the file's bytes).
            fuzzProperty(
                queue.bytes >= 0 && queue.bytes <= file.count,
                "queue counts \(queue.bytes) bytes from a \(file.count)-byte file")
            let now: Int64 = 1_767_225_600_000
            let message = MQTTOutboundMessage(
                topic: "gattway/fuzz", payload: Array(file.prefix(32)), qos: 1, retain: false,
                correlationData: mode & 4 != 0 ? [1, 2, 3] : nil)
            queue.append(message, capturedAt: now, now: now)
            if let last = queue.oldest().last {
                fuzzProperty(last.message == message && last.capturedAt == now, "an appended message read back changed")
            }
            if mode & 0x72 == 0x72, queue.writeErrors == 0 {
                // Mostly dead file above 1 MB: removing the big message compacts it.
                queue.append(
                    MQTTOutboundMessage(
                        topic: "big", payload: [UInt8](repeating: 0xA5, count: 1 << 20), qos: 1, retain: false),
                    capturedAt: now, now: now)
                queue.append(message, capturedAt: now, now: now)
                while queue.count > 1, let first = queue.firstSequence { queue.remove(first) }
                fuzzProperty(queue.oldest().map(\.message) == [message], "compaction lost or changed the last message")
            }
            let before = queue.oldest()
            queue.close()
            guard let reopened = try? DiskQueue(path: path, limits: limits) else { return }
            fuzzProperty(
                reopened.discardedBytes == 0,
                "a file the queue wrote itself lost \(reopened.discardedBytes) bytes on reopening")
            fuzzProperty(reopened.oldest() == before, "reopening changed the messages (\(before.count) before)")
        })
}
