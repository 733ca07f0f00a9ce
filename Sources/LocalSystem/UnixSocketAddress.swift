#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The address of a Unix socket (`sockaddr_un`) for `bind`, `connect` and `sendto`: a path in
/// the file system, or an abstract name written `@name` (Linux: a leading NUL byte, no file;
/// how systemd writes one in `$NOTIFY_SOCKET`).
public struct UnixSocketAddress: Sendable {
    private var storage = sockaddr_un()
    /// The address's length for the system calls: the family, the name and, for a path, its
    /// terminating NUL.
    public let length: socklen_t

    /// Nil when `path` is empty, holds a NUL byte or does not fit (`sun_path` holds 107 bytes
    /// and the NUL).
    public init?(_ path: String) {
        var bytes = Array(path.utf8)
        let abstract = bytes.first == UInt8(ascii: "@")
        if abstract { bytes[0] = 0 }
        guard !bytes.isEmpty, !bytes.dropFirst(abstract ? 1 : 0).contains(0),
            bytes.count < MemoryLayout.size(ofValue: storage.sun_path)
        else { return nil }
        storage.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &storage.sun_path) { $0.copyBytes(from: bytes) }  // the rest stays 0
        length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (abstract ? 0 : 1))
    }

    /// Calls `body` with the address as a `sockaddr` and its ``length``.
    public func withSockaddr<Result>(_ body: (UnsafePointer<sockaddr>, socklen_t) throws -> Result) rethrows -> Result {
        try withUnsafePointer(to: storage) { pointer in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { try body($0, length) }
        }
    }
}
