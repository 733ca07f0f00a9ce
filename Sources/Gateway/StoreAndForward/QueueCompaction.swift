import FIFOQueue

#if canImport(Glibc)
    import Glibc
#endif

/// Rewriting the queue file: the live messages — records copied from the old file a chunk at a
/// time, messages held in memory encoded — to `<path>.tmp`, fsynced and renamed over the file, so
/// that a crash leaves either the old or the new file, both complete. ``DiskQueue`` does it to
/// compact a mostly dead file, to end a failure episode and to write the messages it held in
/// memory at the stop.
///
/// The new file starts with a removal mark below the oldest message (or the next sequence), so
/// even an empty queue writes something: on a full disk the rewrite fails instead of ending a
/// failure episode in vain.
enum QueueCompaction {
    enum Failure: Error {
        /// A record could not be read back from the old file: damaged or cut under the running
        /// queue, not the medium refusing writes.
        case unreadable
        /// A step of writing the new file failed (the temporary file is gone again), or the
        /// renamed file could not be opened for appending (it is complete: the old descriptor
        /// still reads the records at their old offsets).
        case file(DiskQueue.FileFailure)
    }

    /// Rewrites the queue of `entries` (those not in the file are `held`, in order) from
    /// `source` to a new file at `path` and returns it, opened for appending; `entries` then
    /// tell where each record is in it. On failure nothing changes.
    static func rewrite(
        path: String, from source: QueueFile?, entries: inout FIFO<QueueEntry>, held: FIFO<QueuedMessage>,
        nextSequence: UInt64
    ) throws(Failure) -> QueueFile {
        let temporary = path + ".tmp"
        let out = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard out >= 0 else {
            throw .file(DiskQueue.FileFailure(operation: "create", path: temporary, code: errno))
        }
        var written = 0
        var failure: (operation: String, code: Int32)?
        var buffer: [UInt8] = []
        var pending: [UInt8] = []
        /// The record lengths of the held messages, in order.
        var heldLengths: [UInt32] = []
        QueueRecord.encodeRemovalMark(below: entries.first?.sequence ?? nextSequence, into: &pending)
        func flush() {
            if QueueFile.writeAll(out, pending) {
                written += pending.count
                pending.removeAll(keepingCapacity: true)
            } else {
                failure = ("write", errno)
            }
        }
        if entries.count == 0 { flush() }
        var index = 0
        while failure == nil, index < entries.count {
            let entry = entries[index]
            if !entry.isInFile {
                let before = pending.count
                QueueRecord.encode(held[heldLengths.count], into: &pending)
                heldLengths.append(UInt32(pending.count - before))
                index += 1
            } else {
                // Live records in the file, up to a chunk, copied as they are.
                let (end, spanEnd) = entries.run(from: index, below: entries.count, chunk: QueueFile.readChunk)
                guard let source,
                    source.read(at: entry.offset, count: spanEnd - entry.offset, into: &buffer) == spanEnd
                        - entry.offset
                else {
                    failure = ("read", errno)
                    break
                }
                for position in index..<end {
                    let start = entries[position].offset - entry.offset
                    pending.append(contentsOf: buffer[start..<(start + Int(entries[position].length))])
                }
                index = end
            }
            if pending.count >= QueueFile.readChunk || index == entries.count { flush() }
        }
        if failure == nil, fsync(out) != 0 { failure = ("fsync", errno) }
        _ = close(out)
        if failure == nil, rename(temporary, path) != 0 { failure = ("rename", errno) }
        if let failure {
            unlink(temporary)
            if failure.operation == "read" { throw .unreadable }
            throw .file(DiskQueue.FileFailure(operation: failure.operation, path: temporary, code: failure.code))
        }
        let reopened = open(path, O_RDWR | O_APPEND | O_CLOEXEC)
        guard reopened >= 0 else {
            throw .file(DiskQueue.FileFailure(operation: "open", path: path + " for writing", code: errno))
        }
        var offset = QueueRecord.removalMarkLength
        var heldIndex = 0
        for position in 0..<entries.count {
            if !entries[position].isInFile {
                entries[position].length = heldLengths[heldIndex]
                heldIndex += 1
            }
            entries[position].offset = offset
            offset += Int(entries[position].length)
        }
        syncDirectory(of: path)
        return QueueFile(path: path, descriptor: reopened, size: written)
    }

    /// Makes the rename durable.
    private static func syncDirectory(of path: String) {
        let directory = QueueFile.parentDirectory(of: path)
        let descriptor = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if descriptor >= 0 {
            _ = fsync(descriptor)
            _ = close(descriptor)
        }
    }
}
