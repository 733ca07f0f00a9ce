import ESPHomeAPI
import Glibc

/// A blocking plaintext ESPHome API client with a 30 s receive timeout, for tests of the
/// Bluetooth proxy's server (alone, or in `gattway run`).
public struct ESPHomeTestClient {
    public enum Failure: Error { case connect(Int32) }

    public let fd: Int32
    var decoder = PlaintextFrameDecoder(maxPayload: 1 << 16)

    public init(port: UInt16) throws {
        // Close-on-exec: a child another test spawns meanwhile (a broker, a bus) must not inherit
        // the socket, or closing it here would not end the connection the server sees.
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        // Generous: under the whole suite on two cores the server's loop can lag by seconds;
        // a test that waits for a message that never comes still ends.
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            let error = errno
            Glibc.close(fd)
            throw Failure.connect(error)
        }
    }

    public func send(_ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    public func send(type: UInt16, _ payload: [UInt8] = []) {
        send(PlaintextFrameDecoder.encode(ServerMessage(type: type, payload: payload)))
    }

    /// The next message, or nil when the server closed the connection (or 30 s passed).
    public mutating func receive() -> (type: UInt16, payload: [UInt8])? {
        while true {
            if let frame = try? decoder.next() { return frame }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return nil }
            decoder.append(buffer[0..<count])
        }
    }

    public func close() { Glibc.close(fd) }

    /// A HelloRequest's payload: client "tests", API 1.10.
    public static func hello() -> [UInt8] {
        var writer = ProtobufWriter()
        writer.string(1, "tests")
        writer.uint32(2, 1)
        writer.uint32(3, 10)
        return writer.bytes
    }
}
