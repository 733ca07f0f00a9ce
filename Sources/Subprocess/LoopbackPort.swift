#if canImport(Glibc)
    import Glibc
#endif

/// TCP ports on 127.0.0.1 for the daemons `gattway demo` and the tests start (mosquitto): find
/// a free one, and see whether something accepts connections on one.
public enum LoopbackPort {
    /// A socket bound to a free port on 127.0.0.1 (not listening), and the port; the caller
    /// closes it. Throws the errno of the failing call.
    public static func bind() throws(LoopbackPortError) -> (fd: Int32, port: UInt16) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw LoopbackPortError(call: "socket", errno: errno) }
        var address = loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else {
            let error = LoopbackPortError(call: "bind", errno: errno)
            close(fd)
            throw error
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return (fd, UInt16(bigEndian: address.sin_port))
    }

    /// A port on 127.0.0.1 that was free a moment ago (bound to port 0, read back, closed).
    public static func free() throws(LoopbackPortError) -> UInt16 {
        let (fd, port) = try bind()
        close(fd)
        return port
    }

    /// Whether something accepts a TCP connection on 127.0.0.1:`port` now.
    public static func accepts(_ port: UInt16) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = loopback(port: port)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    private static func loopback(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }
}

/// A socket call for a loopback port failed.
public struct LoopbackPortError: Error, Sendable, CustomStringConvertible {
    public var call: String
    public var errno: Int32
    public var description: String { "\(call)(): \(String(cString: strerror(errno)))" }
}
