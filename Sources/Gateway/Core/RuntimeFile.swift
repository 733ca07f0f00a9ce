import LocalSystem

#if canImport(Glibc)
    import Glibc
#endif

/// A file in the state directory that keeps what requests set at run time and that holds secrets:
/// the bind keys (`bindkeys.json`) and the presence identities (`identities.json`). Written with
/// mode 0600, atomically (temporary file, fsync, rename), at most ``writeBurst`` times back to back
/// and then once per ``writeInterval``, so that requests naming ever new devices cannot keep the
/// disk busy. Read at start without trusting it: a file that is not a regular file or is larger
/// than its limit is not read at all, and a file others may read is warned about. Without a state
/// directory there is no file (``path`` nil): what is set lives in memory only.
///
/// No message of this type quotes the file's contents.
package struct RuntimeFile {
    /// File rewrites allowed back to back, then one per ``writeInterval`` (seconds).
    static let writeBurst = 10
    static let writeInterval = 1.0

    /// The file, nil: memory only.
    package let path: String?
    /// What the file holds, for messages ("bind keys").
    let holds: String
    /// Largest file read.
    let maxBytes: Int
    private var writes = TokenBucket(capacity: RuntimeFile.writeBurst, interval: RuntimeFile.writeInterval, now: 0)

    package init(directory: String?, name: String, holds: String, maxBytes: Int) {
        path = directory.map { $0 + "/" + name }
        self.holds = holds
        self.maxBytes = maxBytes
    }

    /// The file's bytes (nil: no file, or one not to be read) and the problems to report. A
    /// missing file is no problem.
    package func read() -> (bytes: [UInt8]?, problems: [String]) {
        guard let path, LocalFile.exists(path) else { return (nil, []) }
        let startsEmpty = "runtime \(holds) start empty"
        var problems: [String] = []
        if let permissions = LocalFile.permissions(path), permissions.mode & 0o077 != 0 {
            problems.append(
                "\(path) is readable by others (mode \(String(permissions.mode, radix: 8))); it holds \(holds): chmod 600 it"
            )
        }
        // Looked at before it is read: a huge file (or a device node) must not be read at all.
        var status = stat()
        guard stat(path, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG, status.st_size <= maxBytes else {
            return (
                nil,
                problems + [
                    "\(path) is not a regular file of at most \(maxBytes) bytes: ignored (\(startsEmpty); it is replaced at the next change)"
                ]
            )
        }
        let bytes: [UInt8]
        do {
            bytes = try LocalFile.contents(path)
        } catch {
            return (nil, problems + ["\(error); \(startsEmpty)"])
        }
        guard bytes.count <= maxBytes else {
            return (nil, problems + ["\(path) grew past \(maxBytes) bytes while read: ignored (\(startsEmpty))"])
        }
        return (bytes, problems)
    }

    /// Replaces the file with `bytes`; nil when written (or when there is no file), else what
    /// stopped it: too many rewrites of late, or the write failed. `unchanged` ends the message
    /// ("the key is unchanged").
    package mutating func write(_ bytes: [UInt8], now: Double, unchanged: String) -> CommandError? {
        guard let path else { return nil }
        guard writes.take(now: now) else {
            return CommandError(
                "rate limited: \(holds) change at most \(Self.writeBurst) times at once, then once per \(Int(Self.writeInterval))s; \(unchanged)"
            )
        }
        // A leftover temporary file keeps its mode through O_TRUNC: start from none.
        unlink(path + ".tmp")
        do {
            try LocalFile.write(bytes, to: path, mode: 0o600)
        } catch {
            return CommandError("\(error); \(unchanged)")
        }
        return nil
    }
}
