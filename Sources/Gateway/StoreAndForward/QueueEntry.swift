import FIFOQueue

/// Where a queued message is: what ``DiskQueue`` keeps in memory for a message in the file
/// (32 bytes), or a stand-in for one held in memory.
struct QueueEntry {
    var sequence: UInt64
    var capturedAt: Int64
    /// The file offset of its record, or -1: the message is the next one held in memory.
    var offset: Int
    /// The whole record (header and body) in the file.
    var length: UInt32
    /// ``QueuedMessage/size``.
    var size: UInt32

    /// Whether its record is in the file.
    var isInFile: Bool { offset >= 0 }
}

extension QueueEntry {
    /// The entry of `queued`, held in memory.
    init(held queued: QueuedMessage) {
        self.init(
            sequence: queued.sequence, capturedAt: queued.capturedAt, offset: -1, length: 0,
            size: UInt32(truncatingIfNeeded: queued.size))
    }
}

extension FIFO where Element == QueueEntry {
    /// The entries from `index` (in the file) on, before `limit`, whose records follow each other
    /// in the file within `chunk` bytes (at least the first): the index after them and the file
    /// offset where the last one ends. One `pread(2)` reads them all.
    func run(from index: Int, below limit: Int, chunk: Int) -> (end: Int, spanEnd: Int) {
        let start = self[index].offset
        var end = index + 1
        var spanEnd = start + Int(self[index].length)
        while end < limit {
            let next = self[end]
            let nextEnd = next.offset + Int(next.length)
            guard next.offset >= spanEnd, nextEnd - start <= chunk else { break }
            spanEnd = nextEnd
            end += 1
        }
        return (end, spanEnd)
    }
}
