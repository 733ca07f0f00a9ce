#if canImport(Glibc)
    import Glibc
#endif

/// An `AF_UNIX` `SOCK_SEQPACKET` socket pair, as bluetoothd hands out from `AcquireNotify` and
/// `AcquireWrite`: one end goes to the client (in the D-Bus reply), the other stays here,
/// non-blocking. Each datagram is one notification or one write command.
struct SeqPacketPair {
    /// Our end (non-blocking, close-on-exec); the caller owns and closes it.
    var local: Int32
    /// The client's end; hand it over with `DBusUnixFD(taking:)`.
    var remote: Int32

    /// Creates the pair.
    /// - Throws: `org.bluez.Error.Failed` with the `errno` text when `socketpair` fails.
    static func make() throws -> SeqPacketPair {
        var fds: [Int32] = [-1, -1]
        let type = Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        guard socketpair(AF_UNIX, type, 0, &fds) == 0 else {
            throw BlueZError.failed(String(cString: strerror(errno)))
        }
        _ = fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK)
        return SeqPacketPair(local: fds[0], remote: fds[1])
    }

    /// Sends one datagram on `fd`; false when the peer is gone or the buffer is full.
    static func send(_ bytes: [UInt8], on fd: Int32) -> Bool {
        bytes.withUnsafeBytes { buffer in
            Glibc.send(fd, buffer.baseAddress, buffer.count, Int32(MSG_NOSIGNAL)) == buffer.count
        }
    }

    /// Reads every queued datagram from `fd`; `closed` is true when the peer hung up.
    static func receiveAll(from fd: Int32, maximum: Int = 517) -> (datagrams: [[UInt8]], closed: Bool) {
        var datagrams: [[UInt8]] = []
        var buffer = [UInt8](repeating: 0, count: maximum)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                datagrams.append(Array(buffer[0..<count]))
            } else if count == 0 {
                return (datagrams, true)
            } else {
                return (datagrams, errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            }
        }
    }
}
