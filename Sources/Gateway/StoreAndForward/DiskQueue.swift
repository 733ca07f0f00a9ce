import FIFOQueue

#if canImport(Glibc)
    import Glibc
#endif

/// The store-and-forward queue: a bounded FIFO of outgoing messages in a crash-safe append-only
/// file (or in memory only when `path` is nil).
///
/// The file is a sequence of records (``QueueRecord``: a message, or a removal mark — every
/// message below a sequence is gone). Every change is one `write(2)` of whole records to a file
/// opened with `O_APPEND` (``QueueFile``), so a process killed at any point (kill -9) leaves at
/// most one torn record at the end; ``init(path:limits:)`` keeps every record before the first
/// one that is incomplete or fails its CRC, truncates the rest and reports it in
/// ``discardedBytes``. The file is not fsynced per message (the page cache survives a process
/// crash; a power loss may lose the last seconds). When the queue empties the file is truncated;
/// when removal marks make it mostly dead it is rewritten to a temporary file, fsynced and
/// renamed over (``QueueCompaction``).
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
    public struct FileFailure: Error, Sendable, Equatable, CustomStringConvertible {
        /// "open", "write", "truncate", "create", "fsync", "rename".
        public var operation: String
        public var path: String
        public var code: Int32

        public var description: String { "cannot \(operation) \(path) (\(String(cString: strerror(code))))" }
    }
    /// Bytes of the queued messages (``QueuedMessage/size``).
    public private(set) var bytes = 0

    /// Every queued message, oldest first.
    private var entries = FIFO<QueueEntry>()
    /// The messages that are not in the file (all of them without a file), oldest first.
    private var held = FIFO<QueuedMessage>()
    private var nextSequence: UInt64 = 0
    /// Nil without a path, after ``close()``, and when not even reading it could be opened.
    private var file: QueueFile?
    private var record: [UInt8] = []

    /// Opens (or creates) the queue file at `path`, recovering what a crash left; nil: memory only.
    /// A file system that refuses writes now but may take them later (space freed, remounted
    /// read-write) does not stop the gateway: the queue starts a failure episode and reads what
    /// the file holds; a setup mistake (permissions, a missing directory, a directory in the
    /// file's place) throws.
    public init(path: String?, limits: Limits) throws(StoreAndForwardError) {
        self.path = path
        self.limits = limits
        guard let path else { return }
        let (opened, refused) = try QueueFile.open(path)
        if let refused { fail(refused) }
        guard let opened else { return }
        file = opened
        let recovered = opened.recover()
        entries = recovered.entries
        for index in 0..<entries.count { bytes += Int(entries[index].size) }
        nextSequence = recovered.nextSequence
        discardedBytes = recovered.discarded
        // Read-only: the damaged tail stays until the file is rewritten, which leaves it out.
        if discardedBytes > 0, fileFailure == nil {
            do { try opened.truncate(to: opened.size) } catch {
                throw StoreAndForwardError(
                    "cannot truncate the damaged tail of \(path): \(String(cString: strerror(error.code)))")
            }
        }
        trimToLimits()
        if count == 0, opened.size > 0 { truncateFile() }
    }

    /// Closes the file (at shutdown, or before the file is opened again): the messages stay in
    /// it for the next open and leave this queue, which can no longer read them. Without a file
    /// nothing changes.
    public func close() {
        guard file != nil else { return }
        file = nil
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
    public static func freeBytes(besides path: String) -> Int? { QueueFile.freeBytes(besides: path) }

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
        var front = FIFO<QueueEntry>()
        var frontHeld = FIFO<QueuedMessage>()
        var previous: UInt64?
        for queued in messages where queued.sequence < limit && previous.map({ queued.sequence > $0 }) ?? true {
            previous = queued.sequence
            var message = queued
            message.message.capturedAt = nil
            front.append(QueueEntry(held: message))
            frontHeld.append(message)
            bytes += message.size
        }
        let added = front.count
        guard added > 0 else { return 0 }
        front.append(contentsOf: entries)
        frontHeld.append(contentsOf: held)
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
        var entry = QueueEntry(held: queued)
        if let file = writableFile {
            let offset = file.size
            record.removeAll(keepingCapacity: true)
            QueueRecord.encode(queued, into: &record)
            if write(record) {
                entry.offset = offset
                entry.length = UInt32(record.count)
            }
        }
        if !entry.isInFile { held.append(queued) }
        entries.append(entry)
        bytes += queued.size
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
        if !first.isInFile { held.removeFirst() }
    }

    /// The longest prefix of up to `limit` oldest messages that can be read: records that lie
    /// next to each other in the file are read with one `pread(2)` of at most
    /// ``QueueFile/readChunk``.
    private func read(upTo limit: Int) -> [QueuedMessage] {
        let total = min(limit, count)
        var batch: [QueuedMessage] = []
        batch.reserveCapacity(total)
        var buffer: [UInt8] = []
        var heldIndex = 0
        var index = 0
        while index < total {
            let entry = entries[index]
            guard entry.isInFile else {
                batch.append(held[heldIndex])
                heldIndex += 1
                index += 1
                continue
            }
            let (end, spanEnd) = entries.run(from: index, below: total, chunk: QueueFile.readChunk)
            guard let file else { return batch }
            let got = file.read(at: entry.offset, count: spanEnd - entry.offset, into: &buffer)
            for position in index..<end {
                let located = entries[position]
                let start = located.offset - entry.offset
                guard start + Int(located.length) <= got,
                    let queued = QueueRecord.decodeRecord(buffer[start..<(start + Int(located.length))]),
                    queued.sequence == located.sequence, queued.capturedAt == located.capturedAt
                else { return batch }
                batch.append(queued)
            }
            index = end
        }
        return batch
    }

    /// The file, while it takes changes (no failure episode).
    private var writableFile: QueueFile? { fileFailure == nil ? file : nil }

    /// Appends whole records to the file; false (and a failure episode) when it refuses them.
    @discardableResult
    private func write(_ bytes: [UInt8]) -> Bool {
        guard let file = writableFile else { return false }
        do {
            try file.append(bytes)
            return true
        } catch {
            fail(error)
            return false
        }
    }

    /// Records that everything before the current head is gone, truncating or compacting the
    /// file when that pays.
    private func writeRemovalMark() {
        guard let file = writableFile else { return }
        guard let first = entries.first else {
            truncateFile()
            return
        }
        record.removeAll(keepingCapacity: true)
        QueueRecord.encodeRemovalMark(below: first.sequence, into: &record)
        write(record)
        if file.size > 1 << 20, file.size > 4 * (bytes + count * 40) { rewrite() }
    }

    private func truncateFile() {
        do { try writableFile?.truncate(to: 0) } catch { fail(error) }
    }

    /// Counts a failed change of the file; the first one begins a failure episode.
    private func fail(_ failure: FileFailure) {
        writeErrors += 1
        if fileFailure == nil { fileFailure = failure }
    }

    /// Rewrites the file with the live messages (``QueueCompaction``): compacts a mostly dead
    /// file, and ends a failure episode (``retryFile()``); true when the file was rewritten.
    @discardableResult
    private func rewrite() -> Bool {
        guard let path else { return false }
        do {
            file = try QueueCompaction.rewrite(
                path: path, from: file, entries: &entries, held: held, nextSequence: nextSequence)
        } catch {
            switch error {
            case .unreadable:
                // A record cut or damaged under the running queue is not the medium refusing
                // writes: the replay drops it when its turn comes (``Drops/unreadable``).
                writeErrors += 1
            case .file(let failure):
                fail(failure)
            }
            return false
        }
        held.removeAll()
        fileFailure = nil
        return true
    }
}
