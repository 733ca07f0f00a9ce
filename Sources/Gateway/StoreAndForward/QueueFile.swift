import FIFOQueue
import LocalSystem

#if canImport(Glibc)
    import Glibc
#endif

/// The queue file itself: opening it, recovering its records after a crash, appending whole
/// records, reading them back, truncating. Records are ``QueueRecord``s; what they mean for the
/// queue (order, bounds, what is still queued) is ``DiskQueue``'s.
///
/// Every append is one `write(2)` of whole records to a descriptor opened with `O_APPEND`, so a
/// process killed at any point leaves at most one torn record at the end, which ``recover()``
/// cuts off; a failed append is truncated back at once, so no torn record is ever left in the
/// middle. Nothing is fsynced per append (the page cache survives a process crash).
final class QueueFile {
    let path: String
    private let descriptor: Int32
    /// Where the valid records end, and the next append goes.
    private(set) var size: Int

    /// Sequences at or above this are damage, not messages: one per message, a queue never gets
    /// near it, and a record claiming one (a flipped high bit, a hand-edited file) would leave
    /// no room for the sequences of the next appends (which would overflow). ``recover()`` cuts
    /// the file at such a record like at a bad CRC — and at a message whose sequence is not
    /// above the one before it: the queue only ever writes them increasing, and removal marks
    /// ("everything below") cannot remove a message that sits later with a lower sequence, so
    /// after a reopen it would come back (delivered or expired, replayed again).
    static let sequenceLimit: UInt64 = 1 << 63

    /// Most bytes read from the file at once (a replay batch, a compaction step, recovery).
    static let readChunk = 256 * 1024

    /// `errno` values of a file system that cannot take the file now but may later: full (space
    /// or quota), read-only, an I/O error.
    static let storageErrors: Set<Int32> = [ENOSPC, EDQUOT, EROFS, EIO]

    /// A descriptor of `path` whose valid records end at `size`; the file owns it from now on.
    init(path: String, descriptor: Int32, size: Int) {
        self.path = path
        self.descriptor = descriptor
        self.size = size
    }

    deinit { _ = Glibc.close(descriptor) }

    /// Opens `path` for appending, created (mode 0600, with its directory) when missing. A file
    /// system that refuses writes now but may take them later (``storageErrors``) does not
    /// stop the gateway: the file is opened for reading only (nil when that fails too) and the
    /// refusal returned; any other error (permissions, a directory in the file's place) throws.
    static func open(_ path: String) throws(StoreAndForwardError) -> (file: QueueFile?, refused: DiskQueue.FileFailure?)
    {
        let directory = parentDirectory(of: path)
        if !directory.isEmpty {
            try? LocalFile.createDirectories(directory)
        }
        unlink(path + ".tmp")
        let descriptor = Glibc.open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        if descriptor >= 0 { return (QueueFile(path: path, descriptor: descriptor, size: 0), nil) }
        let code = errno
        guard storageErrors.contains(code) else {
            throw StoreAndForwardError(
                "cannot open the store-and-forward queue \(path): \(String(cString: strerror(code)))")
        }
        let refused = DiskQueue.FileFailure(operation: "open", path: path + " for writing", code: code)
        let readOnly = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        return (readOnly >= 0 ? QueueFile(path: path, descriptor: readOnly, size: 0) : nil, refused)
    }

    /// The queue a file holds: the messages no removal mark removed, oldest first.
    struct Recovered {
        var entries = FIFO<QueueEntry>()
        /// The sequence after every one the file used.
        var nextSequence: UInt64 = 0
        /// Bytes after the valid records: a torn or corrupt tail.
        var discarded = 0
    }

    /// Reads the file's records, a chunk at a time, up to the first that is incomplete, fails
    /// its CRC or layout, or breaks the order of sequences (``sequenceLimit``); ``size`` becomes
    /// the end of those before it. The file itself is not changed (``truncate(to:)`` cuts the tail).
    func recover() -> Recovered {
        let length = max(0, Int(lseek(descriptor, 0, SEEK_END)))
        var recovered = Recovered()
        var found = FIFO<QueueEntry>()
        var offset = 0
        var removedBelow: UInt64 = 0
        var lastSequence: UInt64?
        var window: [UInt8] = []
        var windowOffset = 0
        var chunk: [UInt8] = []
        /// Makes `window` hold the file's bytes `offset..<offset + count`.
        func load(_ count: Int) -> Bool {
            if offset + count <= windowOffset + window.count { return true }
            window.removeFirst(offset - windowOffset)
            windowOffset = offset
            let missing = offset + count - (windowOffset + window.count)
            let got = read(
                at: windowOffset + window.count,
                count: min(max(missing, Self.readChunk), length - offset - window.count),
                into: &chunk)
            window.append(contentsOf: chunk[0..<got])
            return offset + count <= windowOffset + window.count
        }
        let headerLength = QueueRecord.headerLength
        records: while length - offset >= headerLength, load(headerLength) {
            let header = QueueRecord.Header(window[...], at: offset - windowOffset)
            guard header.length > 0, header.length <= length - offset - headerLength,
                header.length <= Int(UInt32.max) - headerLength, load(headerLength + header.length)
            else { break }
            let start = offset - windowOffset + headerLength
            let body = window[start..<(start + header.length)]
            guard CRC32.checksum(body) == header.checksum else { break }
            switch QueueRecord.Body(body) {
            case .removalMark(let below) where below < Self.sequenceLimit:
                removedBelow = max(removedBelow, below)
            case .message(let layout)
            where layout.sequence < Self.sequenceLimit && lastSequence.map({ layout.sequence > $0 }) ?? true:
                found.append(
                    QueueEntry(
                        sequence: layout.sequence, capturedAt: layout.capturedAt, offset: offset,
                        length: UInt32(truncatingIfNeeded: headerLength + header.length),
                        size: UInt32(truncatingIfNeeded: layout.size)))
                lastSequence = layout.sequence
            default:
                break records
            }
            offset += headerLength + header.length
        }
        while let entry = found.first {
            found.removeFirst()
            if entry.sequence >= removedBelow { recovered.entries.append(entry) }
        }
        recovered.nextSequence = max(removedBelow, lastSequence.map { $0 + 1 } ?? 0)
        recovered.discarded = length - offset
        size = offset
        return recovered
    }

    /// Appends whole records with one `write(2)`. A failed write is truncated back to ``size``:
    /// a torn record in the middle would make the records after it unreachable.
    func append(_ bytes: [UInt8]) throws(DiskQueue.FileFailure) {
        guard Self.writeAll(descriptor, bytes) else {
            let failure = DiskQueue.FileFailure(operation: "write", path: path, code: errno)
            _ = ftruncate(descriptor, off_t(size))
            throw failure
        }
        size += bytes.count
    }

    /// Cuts the file at `length` (0: empty).
    func truncate(to length: Int) throws(DiskQueue.FileFailure) {
        guard ftruncate(descriptor, off_t(length)) == 0 else {
            throw DiskQueue.FileFailure(operation: "truncate", path: path, code: errno)
        }
        size = length
    }

    /// Reads `count` bytes at `offset` into `buffer` (replacing its contents); returns how many
    /// it read: fewer after an error or at the end of the file.
    func read(at offset: Int, count: Int, into buffer: inout [UInt8]) -> Int {
        if buffer.count != count { buffer = [UInt8](repeating: 0, count: count) }
        var done = 0
        while done < count {
            let result = buffer.withUnsafeMutableBytes { raw -> Int in
                guard let base = raw.baseAddress else { return 0 }
                return pread(descriptor, base + done, count - done, off_t(offset + done))
            }
            if result < 0, errno == EINTR { continue }
            guard result > 0 else { return done }
            done += result
        }
        return done
    }

    /// Writes all of `bytes` to `descriptor`, retrying after a signal; false on an error (`errno`).
    static func writeAll(_ descriptor: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let result = bytes.withUnsafeBytes { raw -> Int in
                guard let base = raw.baseAddress else { return 0 }
                return Glibc.write(descriptor, base + offset, raw.count - offset)
            }
            if result < 0 {
                if errno == EINTR { continue }
                return false
            }
            offset += result
        }
        return true
    }

    /// Bytes free for an unprivileged user on the file system of `path`'s directory
    /// (`statvfs`: available blocks × fragment size); nil when it cannot be asked.
    static func freeBytes(besides path: String) -> Int? {
        let directory = parentDirectory(of: path)
        var info = statvfs()
        guard statvfs(directory.isEmpty ? "." : directory, &info) == 0 else { return nil }
        let (bytes, overflow) = UInt64(info.f_bavail).multipliedReportingOverflow(by: UInt64(info.f_frsize))
        return overflow ? Int.max : Int(clamping: bytes)
    }

    /// `path` without its last component ("" for a bare file name), as NSString's
    /// `deletingLastPathComponent` (not in FoundationEssentials).
    static func parentDirectory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "" }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}
