#if canImport(Glibc)
import Glibc
#endif
import LocalSystem

/// The store-and-forward queue: a bounded FIFO of outgoing messages kept in memory and in a
/// crash-safe append-only file (or in memory only when `path` is nil).
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
    }

    public let path: String?
    public let limits: Limits
    public private(set) var drops = Drops()
    /// Bytes of a torn or corrupt tail discarded when the file was opened.
    public private(set) var discardedBytes = 0
    /// Writes that failed (disk full, I/O error); the message stays queued in memory.
    public private(set) var writeErrors = 0
    /// Bytes of the queued messages (``QueuedMessage/size``).
    public private(set) var bytes = 0

    private var entries: [QueuedMessage] = []
    private var head = 0
    private var nextSequence: UInt64 = 0
    private var fd: Int32 = -1
    private var fileSize = 0
    private var record: [UInt8] = []

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
        let contents = LocalFile.read(path) ?? []
        let valid = recover(contents)
        fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw StoreAndForwardError("cannot open the store-and-forward queue \(path): \(Self.errnoText())") }
        if valid < contents.count {
            discardedBytes = contents.count - valid
            if ftruncate(fd, off_t(valid)) != 0 {
                throw StoreAndForwardError("cannot truncate the damaged tail of \(path): \(Self.errnoText())")
            }
        }
        fileSize = valid
        trimToLimits()
        if count == 0, fileSize > 0 { truncateFile() }
    }

    deinit { close() }

    /// Closes the file (the queue keeps working in memory).
    public func close() {
        if fd >= 0 { _ = Glibc.close(fd) }
        fd = -1
    }

    /// Messages waiting.
    public var count: Int { entries.count - head }

    public var isEmpty: Bool { count == 0 }

    /// The oldest message.
    public var first: QueuedMessage? { head < entries.count ? entries[head] : nil }

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

    /// Every waiting message, oldest first.
    public var messages: ArraySlice<QueuedMessage> { entries[head...] }

    /// Appends a message captured at `capturedAt` (ms since 1970), then enforces the bounds
    /// (oldest out) with `now` as the current wall time.
    public func append(_ message: MQTTOutboundMessage, capturedAt: Int64, now: Int64) {
        var queued = QueuedMessage(message: message, capturedAt: capturedAt, sequence: nextSequence)
        queued.message.capturedAt = nil
        nextSequence += 1
        entries.append(queued)
        bytes += queued.size
        record.removeAll(keepingCapacity: true)
        Self.encode(queued, into: &record)
        write(record)
        dropExpired(now: now)
        trimToLimits()
    }

    /// Removes the oldest message if it is `sequence` (acknowledged after delivery); false when
    /// it is no longer queued (a bound dropped it meanwhile).
    @discardableResult
    public func remove(_ sequence: UInt64) -> Bool {
        guard let first, first.sequence == sequence else { return false }
        dropFirst()
        writeRemovalMark()
        if pinned > 0 { pinned -= 1 }
        return true
    }

    /// Drops messages older than `maxAge` (by capture time) at wall time `now` (ms since 1970).
    public func dropExpired(now: Int64) {
        let oldest = now - Int64(limits.maxAge * 1000)
        var dropped = false
        while pinned == 0, let first, first.capturedAt < oldest {
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
        bytes -= entries[head].size
        head += 1
        if head == entries.count {
            entries.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024, head * 2 >= entries.count {
            entries.removeFirst(head)
            head = 0
        }
    }

    /// Records that everything before the current head is gone, truncating or compacting the
    /// file when that pays.
    private func writeRemovalMark() {
        guard fd >= 0 else { return }
        if count == 0 {
            truncateFile()
            return
        }
        record.removeAll(keepingCapacity: true)
        Self.appendRecord(&record) { body in
            body.append(2)
            Self.append(entries[head].sequence, &body)
        }
        write(record)
        if fileSize > 1 << 20, fileSize > 4 * (bytes + count * 40) { compact() }
    }

    private func truncateFile() {
        guard fd >= 0 else { return }
        if ftruncate(fd, 0) == 0 { fileSize = 0 } else { writeErrors += 1 }
    }

    /// Rewrites the live messages to `<path>.tmp`, fsyncs it and renames it over the file: a
    /// crash leaves either the old or the new file, both complete.
    private func compact() {
        guard let path, fd >= 0 else { return }
        var buffer: [UInt8] = []
        for queued in entries[head...] { Self.encode(queued, into: &buffer) }
        let temporary = path + ".tmp"
        let out = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard out >= 0 else {
            writeErrors += 1
            return
        }
        let written = Self.writeAll(out, buffer) && fsync(out) == 0
        _ = Glibc.close(out)
        guard written, rename(temporary, path) == 0 else {
            unlink(temporary)
            writeErrors += 1
            return
        }
        let reopened = open(path, O_RDWR | O_APPEND | O_CLOEXEC)
        guard reopened >= 0 else {
            writeErrors += 1
            return
        }
        _ = Glibc.close(fd)
        fd = reopened
        fileSize = buffer.count
        let directory = Self.parentDirectory(of: path)
        let directoryFD = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryFD >= 0 {
            _ = fsync(directoryFD)
            _ = Glibc.close(directoryFD)
        }
    }

    private func write(_ bytes: [UInt8]) {
        guard fd >= 0 else { return }
        if Self.writeAll(fd, bytes) {
            fileSize += bytes.count
        } else {
            writeErrors += 1
            // Never leave a torn record in the middle: later records would be unreachable.
            _ = ftruncate(fd, off_t(fileSize))
        }
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

    /// Reads the records of `contents` into the queue; returns the length of the valid prefix.
    private func recover(_ contents: [UInt8]) -> Int {
        var offset = 0
        var removedBelow: UInt64 = 0
        var found: [QueuedMessage] = []
        while contents.count - offset >= 8 {
            let length = Int(Self.u32(contents, offset))
            let checksum = Self.u32(contents, offset + 4)
            guard length > 0, length <= contents.count - offset - 8 else { break }
            let body = contents[(offset + 8)..<(offset + 8 + length)]
            guard CRC32.checksum(body) == checksum else { break }
            if body.first == 2, body.count == 9 {
                removedBelow = max(removedBelow, Self.u64(contents, body.startIndex + 1))
            } else if body.first == 1, let queued = Self.decode(body) {
                found.append(queued)
            } else {
                break
            }
            offset += 8 + length
        }
        entries = found.filter { $0.sequence >= removedBelow }
        bytes = entries.reduce(0) { $0 + $1.size }
        nextSequence = max(removedBelow, (found.last?.sequence).map { $0 + 1 } ?? 0)
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

    static func decode(_ body: ArraySlice<UInt8>) -> QueuedMessage? {
        var offset = body.startIndex + 1
        func take(_ count: Int) -> ArraySlice<UInt8>? {
            guard count >= 0, body.endIndex - offset >= count else { return nil }
            defer { offset += count }
            return body[offset..<(offset + count)]
        }
        func bytes() -> [UInt8]? {
            guard let length = take(4).map({ u32(Array($0), 0) }) else { return nil }
            return take(Int(length)).map(Array.init)
        }
        guard let sequence = take(8).map({ u64(Array($0), 0) }), let captured = take(8).map({ u64(Array($0), 0) }),
            let flags = take(2), let topic = bytes(), let hasCorrelation = take(1)?.first
        else { return nil }
        var correlation: [UInt8]?
        if hasCorrelation == 1 {
            guard let data = bytes() else { return nil }
            correlation = data
        }
        guard let payload = bytes(), offset == body.endIndex else { return nil }
        let message = MQTTOutboundMessage(topic: String(decoding: topic, as: UTF8.self), payload: payload, qos: Int(flags[flags.startIndex]),
                                          retain: flags[flags.startIndex + 1] == 1, correlationData: correlation)
        return QueuedMessage(message: message, capturedAt: Int64(bitPattern: captured), sequence: sequence)
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

    private static func u32(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
        (0..<4).reduce(0) { $0 | UInt32(bytes[offset + $1]) << (8 * UInt32($1)) }
    }

    private static func u64(_ bytes: [UInt8], _ offset: Int) -> UInt64 {
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
