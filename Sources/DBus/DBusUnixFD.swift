#if canImport(Glibc)
    import Glibc
#endif

/// A unix file descriptor carried in a D-Bus message (type `h`), owned by this object.
///
/// Ownership: the descriptor is closed when the last reference goes away. Sending a value
/// duplicates it (libdbus `dup`s on `dbus_message_iter_append_basic`), so the sender keeps its
/// copy; a received descriptor is a fresh duplicate owned by the new `DBusUnixFD`. Use
/// ``duplicate()`` to get a descriptor you own and close yourself.
///
/// Invariant behind `Sendable`: `fileDescriptor` is immutable and only closed in `deinit`, when no
/// other reference can exist.
public final class DBusUnixFD: Hashable, Sendable, CustomStringConvertible {
    /// The raw descriptor; valid while this object is alive. Do not close it.
    public let fileDescriptor: Int32

    /// Takes ownership of `fd`: it will be closed with this object.
    public init(taking fd: Int32) {
        fileDescriptor = fd
    }

    /// Duplicates `fd` (with `FD_CLOEXEC`); the caller keeps ownership of `fd`.
    /// - Throws: ``DBusError`` `Failed` with the `errno` text when `fcntl(F_DUPFD_CLOEXEC)` fails.
    public convenience init(duplicating fd: Int32) throws {
        self.init(taking: try Self.dup(fd))
    }

    deinit { close(fileDescriptor) }

    /// A new descriptor for the same open file, owned (and to be closed) by the caller.
    public func duplicate() throws -> Int32 { try Self.dup(fileDescriptor) }

    public var description: String { "fd \(fileDescriptor)" }

    public static func == (lhs: DBusUnixFD, rhs: DBusUnixFD) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    private static func dup(_ fd: Int32) throws -> Int32 {
        let copy = fcntl(fd, F_DUPFD_CLOEXEC, 0)
        guard copy >= 0 else {
            throw DBusError(.failed, "cannot duplicate fd \(fd): \(String(cString: strerror(errno)))")
        }
        return copy
    }
}
