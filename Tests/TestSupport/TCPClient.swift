#if canImport(Glibc)
    import Glibc
#endif

/// Plain TCP clients for tests: a connection that never sends or never reads, to hold a server's
/// connection slot or play a slow client.
public enum TCPClient {
    /// A blocking connection to 127.0.0.1:`port`, its receive buffer set first when given (a
    /// small one keeps the server's writes waiting when the test does not read).
    public static func connect(_ port: UInt16, receiveBuffer: Int32? = nil) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ChildProcessError("socket failed") }
        if var size = receiveBuffer {
            _ = setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            close(fd)
            throw ChildProcessError("connect to 127.0.0.1:\(port) failed")
        }
        return fd
    }

    /// Sends all of `text` (a request) on `fd`.
    public static func send(_ fd: Int32, _ text: String) {
        _ = text.withCString { Glibc.send(fd, $0, strlen($0), 0) }
    }

    /// Whether the server closed `fd` (end of stream or reset), without blocking or consuming
    /// what is waiting to be read.
    public static func isClosed(_ fd: Int32) -> Bool {
        var byte: UInt8 = 0
        let count = recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        return count == 0 || (count < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
    }
}
