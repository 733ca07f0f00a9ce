#if canImport(Glibc)
    import Glibc
#endif

/// The few file-system operations the gateway needs, on POSIX calls directly.
///
/// Nothing the `gattway` executable links imports Foundation or FoundationEssentials: linking
/// FoundationEssentials statically costs ~2.5 MB of resident memory at start (its code,
/// metadata and their relocations) for the handful of calls below (BENCHMARKS.md, resident
/// memory).
public enum LocalFile {
    /// The whole file, or nil when it cannot be opened or read.
    public static func read(_ path: String) -> [UInt8]? {
        try? contents(path)
    }

    /// The whole file; the error says "cannot read PATH" and the system's reason.
    public static func contents(_ path: String) throws(LocalFileError) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw LocalFileError("cannot read \(path)", errno: errno) }
        defer { close(fd) }
        var contents: [UInt8] = []
        var status = stat()
        if fstat(fd, &status) == 0, status.st_size > 0 { contents.reserveCapacity(Int(status.st_size)) }
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw LocalFileError("cannot read \(path)", errno: errno)
            }
            if count == 0 { return contents }
            contents.append(contentsOf: chunk[0..<count])
        }
    }

    /// The file as UTF-8 text (invalid sequences replaced), or nil when it cannot be read.
    public static func readText(_ path: String) -> String? {
        read(path).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Writes `bytes` to `path`: to `path.tmp` first, flushed, then renamed over `path`, so a
    /// reader sees the old or the new contents, never a part.
    public static func write(_ bytes: some Collection<UInt8>, to path: String, mode: mode_t = 0o644)
        throws(LocalFileError)
    {
        let temporary = path + ".tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)
        guard fd >= 0 else { throw LocalFileError("cannot create \(temporary)", errno: errno) }
        var failure: Int32 = 0
        let all = Array(bytes)
        var offset = 0
        while offset < all.count {
            let written = all.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 {
                if errno == EINTR { continue }
                failure = errno
                break
            }
            offset += written
        }
        if failure == 0 && fsync(fd) != 0 { failure = errno }
        close(fd)
        if failure == 0 && rename(temporary, path) != 0 { failure = errno }
        guard failure == 0 else {
            unlink(temporary)
            throw LocalFileError("cannot write \(path)", errno: failure)
        }
    }

    /// Writes `text` as UTF-8, atomically as `write(_:to:mode:)`.
    public static func write(_ text: String, to path: String, mode: mode_t = 0o644) throws(LocalFileError) {
        try write(Array(text.utf8), to: path, mode: mode)
    }

    /// `mkdir -p`: creates `path` and any missing parents. An existing directory is fine.
    public static func createDirectories(_ path: String, mode: mode_t = 0o755) throws(LocalFileError) {
        guard !path.isEmpty else { return }
        var prefix = path.hasPrefix("/") ? "/" : ""
        for component in path.split(separator: "/") {
            prefix += (prefix.isEmpty || prefix.hasSuffix("/") ? "" : "/") + component
            if mkdir(prefix, mode) != 0 && errno != EEXIST {
                throw LocalFileError("cannot create the directory \(prefix)", errno: errno)
            }
        }
        guard isDirectory(path) else { throw LocalFileError("\(path) exists and is not a directory") }
    }

    public static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    public static func isDirectory(_ path: String) -> Bool {
        var status = stat()
        return stat(path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFDIR
    }

    /// A regular file this process may execute.
    public static func isExecutable(_ path: String) -> Bool {
        var status = stat()
        return stat(path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFREG && access(path, X_OK) == 0
    }

    /// The permission bits and owner of `path`, or nil when it does not exist.
    public static func permissions(_ path: String) -> (mode: mode_t, owner: uid_t)? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return (status.st_mode & 0o7777, status.st_uid)
    }

    /// The names in a directory (without "." and ".."), sorted; nil when it cannot be listed.
    public static func contentsOfDirectory(_ path: String) -> [String]? {
        guard let directory = opendir(path) else { return nil }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    /// Where a symbolic link points, or nil when `path` is not one.
    public static func symbolicLinkDestination(_ path: String) -> String? {
        var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = buffer.withUnsafeMutableBytes {
            readlink(path, $0.baseAddress!.assumingMemoryBound(to: CChar.self), $0.count - 1)
        }
        guard count >= 0 else { return nil }
        return String(decoding: buffer[0..<count], as: UTF8.self)
    }

    /// `rm -rf`: removes a file, or a directory with everything in it. Missing is fine.
    public static func removeTree(_ path: String) {
        var status = stat()
        guard lstat(path, &status) == 0 else { return }
        if (status.st_mode & S_IFMT) == S_IFDIR {
            for name in contentsOfDirectory(path) ?? [] { removeTree(path + "/" + name) }
            rmdir(path)
        } else {
            unlink(path)
        }
    }

    /// `$TMPDIR`, else /tmp, without a trailing slash.
    public static var temporaryDirectory: String {
        var directory = LocalEnvironment.value("TMPDIR").flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        while directory.count > 1 && directory.hasSuffix("/") { directory.removeLast() }
        return directory
    }
}

/// A failed file operation: what was attempted and the system's reason.
public struct LocalFileError: Error, CustomStringConvertible, Sendable {
    public let description: String
    /// The system's error number (`ENOENT`, …), 0 when the failure was not a system call's.
    public let code: Int32

    public init(_ what: String, errno code: Int32 = 0) {
        self.code = code
        description = code == 0 ? what : "\(what): \(String(cString: strerror(code)))"
    }
}
