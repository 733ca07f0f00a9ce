import Foundation
import LocalSystem
import Testing

/// UnixSocketAddress against real sockets: what binds where, and what is refused.
@Suite("Unix socket addresses")
struct UnixSocketAddressTests {
    @Test("a path binds a socket file there, and a datagram sent to the same address arrives")
    func pathRoundTrip() throws {
        let directory = NSTemporaryDirectory() + "unixaddr-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/s.sock"
        let address = try #require(UnixSocketAddress(path))
        try roundTrip(address)
        var status = stat()
        #expect(lstat(path, &status) == 0 && status.st_mode & S_IFMT == S_IFSOCK)
    }

    @Test("an abstract name (@name) binds without a file")
    func abstractRoundTrip() throws {
        let name = "gattway-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let address = try #require(UnixSocketAddress("@" + name))
        try roundTrip(address)
        #expect(!FileManager.default.fileExists(atPath: "@" + name))
    }

    @Test("empty, NUL-holding and too long paths are refused; 107 bytes is the longest path")
    func refused() {
        #expect(UnixSocketAddress("") == nil)
        #expect(UnixSocketAddress("/tmp/a\u{0}b") == nil)
        #expect(UnixSocketAddress("/" + String(repeating: "x", count: 107)) == nil)
        #expect(UnixSocketAddress("/" + String(repeating: "x", count: 106)) != nil)
        #expect(UnixSocketAddress("@" + String(repeating: "x", count: 107)) == nil)
    }

    /// Binds a datagram socket to `address`, sends it a datagram from another socket and reads it.
    private func roundTrip(_ address: UnixSocketAddress) throws {
        let server = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        let client = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        defer {
            close(server)
            close(client)
        }
        #expect(address.withSockaddr { bind(server, $0, $1) } == 0, "bind: errno \(errno)")
        let message: [UInt8] = Array("hello".utf8)
        let sent = address.withSockaddr { sockaddr, length in
            message.withUnsafeBytes { sendto(client, $0.baseAddress, $0.count, 0, sockaddr, length) }
        }
        #expect(sent == message.count, "sendto: errno \(errno)")
        var buffer = [UInt8](repeating: 0, count: 16)
        let count = buffer.withUnsafeMutableBytes { recv(server, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        #expect(count == message.count && Array(buffer.prefix(max(count, 0))) == message)
    }
}
