import JSON
import LocalSystem

#if canImport(Glibc)
    import Glibc
#endif

/// The store-and-forward queue: a bounded FIFO of outgoing messages in a crash-safe append-only
/// file (or in memory only when `path` is nil).
///
/// File format (little endian): a sequence of records `[length u32][crc32 u32][body]`, where
/// the body is either a message (`1`, sequence u64, captured-at i64, qos u8, retain u8, topic,
/// correlation data, payload — each with a u32 length) or a removal mark (`2`, sequence u64:
/// every message below it is gone). Every change is one `write(2)` of whole records to a file
/// opened with `O_APPEND`, so a process killed at any point (kill -9) leaves at most one torn
/// record at the end; ``init(path:limits:)`` keeps every record before the first one that is
/// incomplete or fails its CRC, truncates the rest and reports it in ``discardedBytes``. The
/// file is not fsynced per message (the page cache survives a process crash; a power loss may
/// lose the last seconds). When the queue empties the file is truncated; when removal marks
/// make it mostly dead it is rewritten to a temporary file, fsynced and renamed over.
///
/// Memory: with a file, the queue keeps only where each message's record is (offset, length)
/// with its sequence, capture time and size (32 bytes a message); ``oldest(_:)`` reads the
/// messages back from the file (checking each record's CRC again). Without a file every message
/// is kept whole in memory.
///
/// A file that cannot be written (disk full, read-only file system, I/O error): the first failed
/// write, truncation or compaction starts a failure episode (``fileFailure``, the operation and
/// `errno`). During it the file is left alone: new messages are kept whole in memory (the bounds
/// still apply), removals are not written, and what is in the file is still read from it.
/// ``retryFile()`` ends the episode by rewriting every queued message — those in the file and
/// those in memory, in order — to a fresh file, as a compaction does (the caller decides when;
/// ``StoreAndForward`` tries every ``StoreAndForward/retryInterval``). A file that cannot be
/// opened for writing at start (read-only, full, I/O error) starts an episode too: what a
/// previous run left in it is read through a read-only descriptor and replayed as usual.
///
/// Bounds: ``Limits`` — when a message would exceed `maxMessages` or `maxBytes` the oldest
/// messages are dropped (``Drops/full``); messages older than `maxAge` by capture time are
/// dropped (``Drops/expired``) by ``dropExpired(now:)`` and on every append.
///
/// Not thread-safe: one owner (``StoreAndForward`` keeps it under its lock).
public final class DiskQueue {
    /// The bounds of the queue.
    public struct Limits: Sendable, Equatable {
        public var maxMessages: Int
        public var maxBytes: Int
        /// Seconds.
        public var maxAge: Double

        public init(maxMessages: Int, maxBytes: Int, maxAge: Double) {
            self.maxMessages = maxMessages
            self.maxBytes = maxBytes
            self.maxAge = maxAge
        }

        public init(_ settings: StoreAndForwardSettings) {
            self.init(maxMessages: settings.maxMessages, maxBytes: settings.maxBytes, maxAge: settings.maxAge)
        }
    }

    /// Messages dropped by a bound.
    public struct Drops: Sendable, Equatable {
        /// The oldest messages, to stay within `maxMessages`/`maxBytes`.
        public var full = 0
        /// Older than `maxAge` when replayed (or when the queue was trimmed).
        public var expired = 0
        /// Their record could not be read back from the file (changed or damaged under the
        /// running gateway, or an I/O error).
        public var unreadable = 0
    }

    public let path: String?
    public let limits: Limits
    public private(set) var drops = Drops()
    /// Bytes of a torn or corrupt tail discarded when the file was opened.
    public private(set) var discardedBytes = 0
    /// Failed attempts to change the file: the write that began a failure episode, and each
    /// failed ``retryFile()`` (messages queued during an episode are not tried one by one).
    public private(set) var writeErrors = 0
    /// Why the file is not being written, since the failure that began the episode; nil while
    /// it is (or without a file).
    public private(set) var fileFailure: FileFailure?

    /// A failed change of the queue file: which operation, on which path, and `errno`.
    public struct FileFailure: Sendable, Equatable, CustomStringConvertible {
        /// "open", "write", "truncate", "create", "fsync", "rename".
        public var operation: String
        public var path: String
        public var code: Int32

        public var description: String { "cannot \(operation) \(path) (\(String(cString: strerror(code))))" }
    }
    /// Bytes of the queued messages (``QueuedMessage/size``).
    public private(set) var bytes = 0

    /// Where a queued message is.
    private struct Entry {
        var sequence: UInt64
        var capturedAt: Int64
        /// The file offset of its record, or -1: the message is the next one in `held`.
        var offset: Int
        /// The whole record (header and body) in the file.
        var length: UInt32
        /// ``QueuedMessage/size``.
        var size: UInt32
    }

    /// Every queued message, oldest first.
    private var entries = FIFO<Entry>()
    /// The messages that are not in the file (all of them without a file), oldest first.
    private var held = FIFO<QueuedMessage>()
    private var nextSequence: UInt64 = 0
    private var fd: Int32 = -1
    private var fileSize = 0
    private var record: [UInt8] = []

    /// Most bytes read from the file at once (a replay batch, a compaction step).
    static let readChunk = 256 * 1024

    /// Sequences at or above this are damage, not messages: one per message, a queue never gets
    /// near it, and a record claiming one (a flipped high bit, a hand-edited file) would leave
    /// no room for the sequences of the next appends (which would overflow). ``init(path:limits:)``
    /// cuts the file at such a record like at a bad CRC — and at a message whose sequence is not
    /// above the one before it: the queue only ever writes them increasing, and removal marks
    /// ("everything below") cannot remove a message that sits later with a lower sequence, so
    /// after a reopen it would come back (delivered or expired, replayed again).
    static let sequenceLimit: UInt64 = 1 << 63

    /// Opens (or creates) the queue file at `path`, recovering what a crash left; nil: memory only.
    public init(path: String?, limits: Limits) throws(StoreAndForwardError) {
        self.path = path
        self.limits = limits
        guard let path else { return }
        let directory = Self.parentDirectory(of: path)
        if !directory.isEmpty {
            try? LocalFile.createDirectories(directory)
        }
        unlink(path + ".tmp")
        fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        if fd < 0 {
            let code = errno
            // A medium that may recover by itself (space freed, remounted read-write) does not
            // stop the gateway: the queue starts in memory; a setup mistake (permissions, a
            // missing directory, a directory in the file's place) does.
            guard Self.storageErrors.contains(code) else {
                throw StoreAndForwardError(
                    "cannot open the store-and-forward queue \(path): \(String(cString: strerror(code)))")
            }
            fileFailure = FileFailure(operation: "open", path: path + " for writing", code: code)
            writeErrors += 1
            fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { return }
        }
        let size = Int(lseek(fd, 0, SEEK_END))
        let valid = recover(size: max(0, size))
        if valid < size {
            discardedBytes = size - valid
            // Read-only: the damaged tail stays until the file is rewritten, which leaves it out.
            if fileFailure == nil, ftruncate(fd, off_t(valid)) != 0 {
                throw StoreAndForwardError("cannot truncate the damaged tail of \(path): \(Self.errnoText())")
            }
        }
        fileSize = valid
        trimToLimits()
        if count == 0, fileSize > 0 { truncateFile() }
    }

    /// `errno` values of a file system that cannot take the file now but may later: full (space
    /// or quota), read-only, an I/O error.
    static let storageErrors: Set<Int32> = [ENOSPC, EDQUOT, EROFS, EIO]

    deinit { close() }

    /// Closes the file (at shutdown, or before the file is opened again): the messages stay in
    /// it for the next open and leave this queue, which can no longer read them. Without a file
    /// nothing changes.
    public func close() {
        guard fd >= 0 else { return }
        _ = Glibc.close(fd)
        fd = -1
        entries.removeAll()
        held.removeAll()
        bytes = 0
        pinned = 0
    }

    /// Messages waiting.
    public var count: Int { entries.count }

    public var isEmpty: Bool { count == 0 }

    /// Every queued message is in the file, and the file took the last change: true unless
    /// there is no file or a failure episode is on (``fileFailure``).
    public var isDurable: Bool { path != nil && fileFailure == nil }

    /// Messages kept only in memory: without a file all of them, with one those queued during a
    /// failure episode (or whose write began it).
    public var memoryOnlyCount: Int { held.count }

    /// Bytes free for an unprivileged user on the file system of `path`'s directory
    /// (`statvfs`: available blocks × fragment size); nil when it cannot be asked.
    public static func freeBytes(besides path: String) -> Int? {
        let directory = parentDirectory(of: path)
        var info = statvfs()
        guard statvfs(directory.isEmpty ? "." : directory, &info) == 0 else { return nil }
        let (bytes, overflow) = UInt64(info.f_bavail).multipliedReportingOverflow(by: UInt64(info.f_frsize))
        return overflow ? Int.max : Int(clamping: bytes)
    }

    /// Ends a failure episode if the file can be written again: writes every queued message, in
    /// order, to a fresh file (a temporary file, fsynced, renamed over the old one) and appends
    /// to that from now on. True when the queue is durable again (also when no episode was on
    /// and there is a file); false while the file still cannot be written (counted in
    /// ``writeErrors``) and without a file.
    @discardableResult
    public func retryFile() -> Bool {
        guard path != nil else { return false }
        guard fileFailure != nil else { return true }
        return rewrite()
    }

    /// The sequence of the oldest message.
    public var firstSequence: UInt64? { entries.first?.sequence }

    /// A sequence for a message that is not queued now but may be put ahead of the queue later
    /// (``prepend(_:)``): a message handed to the broker live, not yet acknowledged. Sequences
    /// reserved and appended come from one counter, so they follow the order of the calls.
    public func reserveSequence() -> UInt64 {
        defer { nextSequence += 1 }
        return nextSequence
    }

    /// Puts `messages` — oldest first, each with a sequence from ``reserveSequence()`` below
    /// every queued message's — ahead of the queue, in memory only until ``persist()`` writes
    /// them. A message whose sequence would break the order of the file (not above the one
    /// before it, not below the oldest queued) is left out: a reopen would cut the file there.
    /// The bounds are not applied here (the next open applies them), nor is ``pinned`` changed:
    /// this is for the stop (``StoreAndForward/stop()``). Returns how many were put.
    @discardableResult
    public func prepend(_ messages: [QueuedMessage]) -> Int {
        let limit = entries.first?.sequence ?? nextSequence
        var front = FIFO<Entry>()
        var frontHeld = FIFO<QueuedMessage>()
        var previous: UInt64?
        for queued in messages where queued.sequence < limit && previous.map({ queued.sequence > $0 }) ?? true {
            previous = queued.sequence
            var message = queued
            message.message.capturedAt = nil
            let size = message.size
            front.append(
                Entry(
                    sequence: message.sequence, capturedAt: message.capturedAt, offset: -1, length: 0,
                    size: UInt32(truncatingIfNeeded: size)))
            frontHeld.append(message)
            bytes += size
        }
        let added = front.count
        guard added > 0 else { return 0 }
        for index in 0..<entries.count { front.append(entries[index]) }
        for index in 0..<held.count { frontHeld.append(held[index]) }
        entries = front
        held = frontHeld
        return added
    }

    /// Writes every message kept only in memory (``memoryOnlyCount``: put ahead by
    /// ``prepend(_:)``, or queued during a failure episode) to the file, in order with those
    /// already in it, by rewriting the whole file (temporary file, fsync, rename — as
    /// ``retryFile()``). True when every queued message is in the file afterwards (also when
    /// nothing was held and the file takes changes); false without a file and when it cannot be
    /// written (counted in ``writeErrors``; the messages stay in memory).
    @discardableResult
    public func persist() -> Bool {
        guard path != nil else { return false }
        guard held.count > 0 || fileFailure != nil else { return true }
        return rewrite()
    }

    /// How many of the oldest messages were handed to the broker (a replay batch) and await its
    /// acknowledgement: the bounds do not drop them — they leave by ``remove(_:)`` — so a message
    /// the broker is receiving is never also counted as dropped. Meanwhile the queue may exceed
    /// its bounds; once none is pinned, the oldest beyond them are dropped as usual.
    public var pinned = 0 {
        didSet {
            pinned = max(0, min(pinned, count))
            if pinned == 0, oldValue > 0 { trimToLimits() }
        }
    }

    /// Up to `limit` of the oldest messages, oldest first, read back from the file. A record that
    /// can no longer be read ends the batch before it; when it is the oldest (and nothing is
    /// pinned) it is dropped and counted (``Drops/unreadable``) and the next ones are read.
    public func oldest(_ limit: Int = .max) -> [QueuedMessage] {
        while true {
            let batch = read(upTo: limit)
            guard batch.isEmpty, count > 0, limit > 0, pinned == 0 else { return batch }
            dropFirst()
            drops.unreadable += 1
            writeRemovalMark()
        }
    }

    /// Appends a message captured at `capturedAt` (ms since 1970), then enforces the bounds
    /// (oldest out) with `now` as the current wall time.
    public func append(_ message: MQTTOutboundMessage, capturedAt: Int64, now: Int64) {
        var queued = QueuedMessage(message: message, capturedAt: capturedAt, sequence: nextSequence)
        queued.message.capturedAt = nil
        nextSequence += 1
        let size = queued.size
        let offset = fileSize
        var stored = false
        if fd >= 0, fileFailure == nil {
            record.removeAll(keepingCapacity: true)
            Self.encode(queued, into: &record)
            stored = write(record)
        }
        if !stored { held.append(queued) }
        entries.append(
            Entry(
                sequence: queued.sequence, capturedAt: capturedAt, offset: stored ? offset : -1,
                length: stored ? UInt32(record.count) : 0, size: UInt32(truncatingIfNeeded: size)))
        bytes += size
        dropExpired(now: now)
        trimToLimits()
    }

    /// Removes the oldest message if it is `sequence` (acknowledged after delivery); false when
    /// it is no longer queued (a bound dropped it meanwhile).
    @discardableResult
    public func remove(_ sequence: UInt64) -> Bool {
        guard let first = firstSequence, first == sequence else { return false }
        dropFirst()
        writeRemovalMark()
        if pinned > 0 { pinned -= 1 }
        return true
    }

    /// Drops messages older than `maxAge` (by capture time) at wall time `now` (ms since 1970).
    public func dropExpired(now: Int64) {
        // max_age may be any positive duration; one reaching before Int64.min milliseconds expires nothing.
        let (oldest, overflow) = now.subtractingReportingOverflow(Int64(saturating: limits.maxAge * 1000))
        if overflow { return }
        var dropped = false
        while pinned == 0, let first = entries.first, first.capturedAt < oldest {
            dropFirst()
            drops.expired += 1
            dropped = true
        }
        if dropped { writeRemovalMark() }
    }

    // MARK: Internals

    private func trimToLimits() {
        var dropped = false
        while pinned == 0, count > limits.maxMessages || (count > 0 && bytes > limits.maxBytes) {
            dropFirst()
            drops.full += 1
            dropped = true
        }
        if dropped { writeRemovalMark() }
    }

    private func dropFirst() {
        let first = entries.removeFirst()
        bytes -= Int(first.size)
        if first.offset < 0 { held.removeFirst() }
    }

    /// The longest prefix of up to `limit` oldest messages that can be read: records that lie
    /// next to each other in the file are read with one `pread(2)` of at most ``readChunk``.
    private func read(upTo limit: Int) -> [QueuedMessage] {
        let total = min(limit, count)
        var batch: [QueuedMessage] = []
        batch.reserveCapacity(total)
        var buffer: [UInt8] = []
        var heldIndex = 0
        var index = 0
        while index < total {
            let entry = entries[index]
            guard entry.offset >= 0 else {
                batch.append(held[heldIndex])
                heldIndex += 1
                index += 1
                continue
            }
            let (end, spanEnd) = run(from: index, below: total)
            guard fd >= 0 else { return batch }
            let got = Self.read(fd, at: entry.offset, count: spanEnd - entry.offset, into: &buffer)
            for position in index..<end {
                let located = entries[position]
                let start = located.offset - entry.offset
                guard start + Int(located.length) <= got,
                    let queued = Self.decodeRecord(buffer[start..<(start + Int(located.length))]),
                    queued.sequence == located.sequence, queued.capturedAt == located.capturedAt
                else { return batch }
                batch.append(queued)
            }
            index = end
        }
        return batch
    }

    /// The entries from `index` (in the file) on, before `limit`, whose records follow each other in
    /// the file within one ``readChunk`` (at least the first): the index after them and the file
    /// offset where the last one ends.
    private func run(from index: Int, below limit: Int) -> (end: Int, spanEnd: Int) {
        let start = entries[index].offset
        var end = index + 1
        var spanEnd = start + Int(entries[index].length)
        while end < limit {
            let next = entries[end]
            let nextEnd = next.offset + Int(next.length)
            guard next.offset >= spanEnd, nextEnd - start <= Self.readChunk else { break }
            spanEnd = nextEnd
            end += 1
        }
        return (end, spanEnd)
    }

    /// Records that everything before the current head is gone, truncating or compacting the
    /// file when that pays.
    private func writeRemovalMark() {
        guard fd >= 0, fileFailure == nil else { return }
        guard let first = entries.first else {
            truncateFile()
            return
        }
        record.removeAll(keepingCapacity: true)
        Self.encodeRemovalMark(below: first.sequence, into: &record)
        write(record)
        if fileSize > 1 << 20, fileSize > 4 * (bytes + count * 40) { rewrite() }
    }

    private func truncateFile() {
        guard fd >= 0, fileFailure == nil else { return }
        if ftruncate(fd, 0) == 0 { fileSize = 0 } else { fail("truncate", path ?? "", errno) }
    }

    /// Counts a failed change of the file; the first one begins a failure episode.
    private func fail(_ operation: String, _ path: String, _ code: Int32) {
        writeErrors += 1
        if fileFailure == nil { fileFailure = FileFailure(operation: operation, path: path, code: code) }
    }

    /// Rewrites the live messages to `<path>.tmp` (copying their records from the file a chunk at
    /// a time, writing those held in memory), fsyncs it and renames it over the file: a crash
    /// leaves either the old or the new file, both complete. The new file starts with a removal
    /// mark below the oldest message (or the next sequence), so even an empty queue writes
    /// something: on a full disk this fails instead of ending a failure episode in vain.
    /// Compacts a mostly dead file, and ends a failure episode (``retryFile()``); true when the
    /// file was rewritten.
    @discardableResult
    private func rewrite() -> Bool {
        guard let path else { return false }
        let temporary = path + ".tmp"
        let out = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard out >= 0 else {
            fail("create", temporary, errno)
            return false
        }
        var written = 0
        var copied = true
        var failure: (operation: String, code: Int32)?
        var buffer: [UInt8] = []
        var pending: [UInt8] = []
        Self.encodeRemovalMark(below: entries.first?.sequence ?? nextSequence, into: &pending)
        var heldIndex = 0
        var index = 0
        if entries.count == 0 {
            copied = Self.writeAll(out, pending)
            if !copied { failure = ("write", errno) }
            written = pending.count
        }
        while copied, index < entries.count {
            let entry = entries[index]
            if entry.offset < 0 {
                let before = pending.count
                Self.encode(held[heldIndex], into: &pending)
                entries[index].length = UInt32(pending.count - before)
                heldIndex += 1
                index += 1
            } else {
                // Live records in the file, up to a chunk, copied as they are.
                let (end, spanEnd) = run(from: index, below: entries.count)
                copied =
                    fd >= 0
                    && Self.read(fd, at: entry.offset, count: spanEnd - entry.offset, into: &buffer) == spanEnd
                        - entry.offset
                if !copied { failure = ("read", errno) }
                for position in index..<end where copied {
                    let start = entries[position].offset - entry.offset
                    pending.append(contentsOf: buffer[start..<(start + Int(entries[position].length))])
                }
                index = end
            }
            if copied, pending.count >= Self.readChunk || index == entries.count {
                copied = Self.writeAll(out, pending)
                if !copied { failure = ("write", errno) }
                written += pending.count
                pending.removeAll(keepingCapacity: true)
            }
        }
        if copied, fsync(out) != 0 { failure = ("fsync", errno) }
        _ = Glibc.close(out)
        if failure == nil, rename(temporary, path) != 0 { failure = ("rename", errno) }
        if let failure {
            unlink(temporary)
            if failure.operation == "read" {
                // A record cut or damaged under the running queue is not the medium refusing
                // writes: the replay drops it when its turn comes (``Drops/unreadable``).
                writeErrors += 1
            } else {
                fail(failure.operation, temporary, failure.code)
            }
            return false
        }
        let reopened = open(path, O_RDWR | O_APPEND | O_CLOEXEC)
        guard reopened >= 0 else {
            // The renamed file is complete, but this run cannot append to it: the old descriptor
            // still reads the records at their old offsets; the next retry rewrites them.
            fail("open", path + " for writing", errno)
            return false
        }
        if fd >= 0 { _ = Glibc.close(fd) }
        fd = reopened
        fileSize = written
        var offset = Self.removalMarkLength
        for position in 0..<entries.count {
            entries[position].offset = offset
            offset += Int(entries[position].length)
        }
        held.removeAll()
        fileFailure = nil
        let directory = Self.parentDirectory(of: path)
        let directoryFD = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryFD >= 0 {
            _ = fsync(directoryFD)
            _ = Glibc.close(directoryFD)
        }
        return true
    }

    @discardableResult
    private func write(_ bytes: [UInt8]) -> Bool {
        guard fd >= 0, fileFailure == nil else { return false }
        if Self.writeAll(fd, bytes) {
            fileSize += bytes.count
            return true
        }
        fail("write", path ?? "", errno)
        // Never leave a torn record in the middle: later records would be unreachable.
        _ = ftruncate(fd, off_t(fileSize))
        return false
    }

    private static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let result = bytes.withUnsafeBytes { raw -> Int in
                guard let base = raw.baseAddress else { return 0 }
                return Glibc.write(fd, base + offset, raw.count - offset)
            }
            if result < 0 {
                if errno == EINTR { continue }
                return false
            }
            offset += result
        }
        return true
    }

    /// Reads `count` bytes at `offset` into `buffer` (replacing its contents); returns how many
    /// it read: fewer after an error or at the end of the file.
    private static func read(_ fd: Int32, at offset: Int, count: Int, into buffer: inout [UInt8]) -> Int {
        if buffer.count != count { buffer = [UInt8](repeating: 0, count: count) }
        var done = 0
        while done < count {
            let result = buffer.withUnsafeMutableBytes { raw -> Int in
                guard let base = raw.baseAddress else { return 0 }
                return pread(fd, base + done, count - done, off_t(offset + done))
            }
            if result < 0, errno == EINTR { continue }
            guard result > 0 else { return done }
            done += result
        }
        return done
    }

    /// Reads the records of the file (`size` bytes) into the queue, a chunk at a time; returns
    /// the length of the valid prefix.
    private func recover(size: Int) -> Int {
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
            let got = Self.read(
                fd, at: windowOffset + window.count,
                count: min(max(missing, Self.readChunk), size - offset - window.count),
                into: &chunk)
            window.append(contentsOf: chunk[0..<got])
            return offset + count <= windowOffset + window.count
        }
        while size - offset >= 8, load(8) {
            let header = offset - windowOffset
            let length = Int(Self.u32(window[...], header))
            let checksum = Self.u32(window[...], header + 4)
            guard length > 0, length <= size - offset - 8, length <= Int(UInt32.max) - 8, load(8 + length) else {
                break
            }
            let start = offset - windowOffset + 8
            let body = window[start..<(start + length)]
            guard CRC32.checksum(body) == checksum else { break }
            if body.first == 2, body.count == 9 {
                let below = Self.u64(body, body.startIndex + 1)
                guard below < Self.sequenceLimit else { break }
                removedBelow = max(removedBelow, below)
            } else if body.first == 1, let layout = Layout(body), layout.sequence < Self.sequenceLimit,
                lastSequence.map({ layout.sequence > $0 }) ?? true
            {
                entries.append(
                    Entry(
                        sequence: layout.sequence, capturedAt: layout.capturedAt, offset: offset,
                        length: UInt32(truncatingIfNeeded: 8 + length), size: UInt32(truncatingIfNeeded: layout.size)))
                lastSequence = layout.sequence
            } else {
                break
            }
            offset += 8 + length
        }
        var live = FIFO<Entry>()
        while let entry = entries.first {
            entries.removeFirst()
            if entry.sequence >= removedBelow { live.append(entry) }
        }
        entries = live
        bytes = 0
        for index in 0..<entries.count { bytes += Int(entries[index].size) }
        nextSequence = max(removedBelow, lastSequence.map { $0 + 1 } ?? 0)
        return offset
    }

    // MARK: Encoding

    static func encode(_ queued: QueuedMessage, into buffer: inout [UInt8]) {
        appendRecord(&buffer) { body in
            body.append(1)
            append(queued.sequence, &body)
            append(UInt64(bitPattern: queued.capturedAt), &body)
            body.append(UInt8(truncatingIfNeeded: queued.message.qos))
            body.append(queued.message.retain ? 1 : 0)
            appendBytes(Array(queued.message.topic.utf8), &body)
            if let correlation = queued.message.correlationData {
                body.append(1)
                appendBytes(correlation, &body)
            } else {
                body.append(0)
            }
            appendBytes(queued.message.payload, &body)
        }
    }

    /// A removal mark: every message below `sequence` is gone.
    static func encodeRemovalMark(below sequence: UInt64, into buffer: inout [UInt8]) {
        appendRecord(&buffer) { body in
            body.append(2)
            append(sequence, &body)
        }
    }

    /// Bytes of a removal mark record (header and body).
    static let removalMarkLength = 8 + 9

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
                return take(Int(DiskQueue.u32(body, length.lowerBound)))
            }
            guard let sequence = take(8), let captured = take(8), let flags = take(2), let topic = field(),
                let hasCorrelation = take(1)
            else { return nil }
            var correlation: Range<Int>?
            if body[hasCorrelation.lowerBound] == 1 {
                guard let data = field() else { return nil }
                correlation = data
            }
            guard let payload = field(), offset == body.endIndex else { return nil }
            self.sequence = DiskQueue.u64(body, sequence.lowerBound)
            self.capturedAt = Int64(bitPattern: DiskQueue.u64(body, captured.lowerBound))
            self.qos = body[flags.lowerBound]
            self.retain = body[flags.lowerBound + 1] == 1
            self.topic = topic
            self.correlation = correlation
            self.payload = payload
        }
    }

    static func decode(_ body: ArraySlice<UInt8>) -> QueuedMessage? {
        guard body.first == 1, let layout = Layout(body) else { return nil }
        let message = MQTTOutboundMessage(
            topic: String(decoding: body[layout.topic], as: UTF8.self), payload: Array(body[layout.payload]),
            qos: Int(layout.qos), retain: layout.retain, correlationData: layout.correlation.map { Array(body[$0]) })
        return QueuedMessage(message: message, capturedAt: layout.capturedAt, sequence: layout.sequence)
    }

    /// A whole message record (header and body) whose length and CRC hold.
    static func decodeRecord(_ record: ArraySlice<UInt8>) -> QueuedMessage? {
        guard record.count > 8 else { return nil }
        let body = record.dropFirst(8)
        guard Int(u32(record, record.startIndex)) == body.count,
            CRC32.checksum(body) == u32(record, record.startIndex + 4)
        else { return nil }
        return decode(body)
    }

    private static func appendRecord(_ buffer: inout [UInt8], _ body: (inout [UInt8]) -> Void) {
        let start = buffer.count
        buffer.append(contentsOf: [0, 0, 0, 0, 0, 0, 0, 0])
        body(&buffer)
        let length = buffer.count - start - 8
        let checksum = CRC32.checksum(buffer[(start + 8)...])
        for shift in 0..<4 {
            buffer[start + shift] = UInt8(truncatingIfNeeded: UInt32(length) >> (8 * shift))
            buffer[start + 4 + shift] = UInt8(truncatingIfNeeded: checksum >> (8 * shift))
        }
    }

    private static func append(_ value: UInt64, _ buffer: inout [UInt8]) {
        for shift in 0..<8 { buffer.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(shift)))) }
    }

    private static func appendBytes(_ bytes: [UInt8], _ buffer: inout [UInt8]) {
        for shift in 0..<4 { buffer.append(UInt8(truncatingIfNeeded: UInt32(bytes.count) >> (8 * UInt32(shift)))) }
        buffer.append(contentsOf: bytes)
    }

    /// The u32 at index `offset` of `bytes` (an index of the slice, not relative to its start).
    private static func u32(_ bytes: ArraySlice<UInt8>, _ offset: Int) -> UInt32 {
        (0..<4).reduce(0) { $0 | UInt32(bytes[offset + $1]) << (8 * UInt32($1)) }
    }

    private static func u64(_ bytes: ArraySlice<UInt8>, _ offset: Int) -> UInt64 {
        (0..<8).reduce(0) { $0 | UInt64(bytes[offset + $1]) << (8 * UInt64($1)) }
    }

    private static func errnoText() -> String { String(cString: strerror(errno)) }

    /// `path` without its last component ("" for a bare file name), as NSString's
    /// `deletingLastPathComponent` (not in FoundationEssentials).
    static func parentDirectory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "" }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}

/// A first-in first-out array: removing the oldest is O(1) (the storage is compacted once half
/// of it is removed, freed once all of it is). Subscripts count from the oldest.
struct FIFO<Element> {
    private var storage: [Element] = []
    private var head = 0

    var count: Int { storage.count - head }
    var first: Element? { head < storage.count ? storage[head] : nil }

    subscript(index: Int) -> Element {
        get { storage[head + index] }
        set { storage[head + index] = newValue }
    }

    mutating func append(_ element: Element) { storage.append(element) }

    @discardableResult
    mutating func removeFirst() -> Element {
        let element = storage[head]
        head += 1
        if head == storage.count {
            // Empty: a small array is kept for reuse, a large one (after a burst) freed.
            storage.removeAll(keepingCapacity: storage.count <= 4096)
            head = 0
        } else if head >= 1024, head * 2 >= storage.count {
            storage.removeFirst(head)
            head = 0
        }
        return element
    }

    mutating func removeAll() {
        storage = []
        head = 0
    }
}
