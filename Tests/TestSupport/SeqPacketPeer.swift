import Foundation
import LocalSystem

#if canImport(Glibc)
    import Glibc
#endif

/// A listening Unix `SOCK_SEQPACKET` socket in a fresh temporary directory and the one client it
/// accepts: the far end of a packet protocol for tests (e.g. a management socket served to
/// `KernelRadio`), sending and receiving whole datagrams. Each call blocks a thread of its own
/// (never one of Swift's cooperative pool, which a loaded test run may have all busy) with a
/// timeout — ``defaultWait`` unless the test says otherwise: the far end's side runs on that
/// pool, which a CI run once kept busy for 15.6 s (every test then running waited as long), so a
/// wait of 10 s failed a test that was only starved.
public final class SeqPacketPeer: @unchecked Sendable {
    public let path: String
    private var listener: Int32
    private var client: Int32 = -1

    public init() throws {
        let directory = try TemporaryDirectory.make(prefix: "seqpacket")
        path = directory.appendingPathComponent("peer.sock").path
        listener = socket(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard listener >= 0 else { throw TestTimeout(description: "socket: \(errno)") }
        guard let address = UnixSocketAddress(path) else { throw TestTimeout(description: "socket path \(path)") }
        let bound = address.withSockaddr { bind(listener, $0, $1) }
        guard bound == 0, listen(listener, 4) == 0 else { throw TestTimeout(description: "bind/listen: \(errno)") }
    }

    deinit { close() }

    /// Waits up to `seconds` for the client to connect.
    public func accept(within seconds: Double = defaultWait) async throws {
        try await onThread { try self.acceptNow(within: seconds) }
    }

    /// Sends one datagram to the client (waiting while its socket buffer is full).
    public func send(_ bytes: [UInt8]) async throws {
        try await onThread { try self.sendNow(bytes) }
    }

    /// The client's next datagram, waiting up to `seconds`.
    public func receive(within seconds: Double = defaultWait) async throws -> [UInt8] {
        try await onThread { try self.receiveNow(within: seconds) }
    }

    private func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try body() }) }.start()
        }
    }

    private func acceptNow(within seconds: Double) throws {
        guard wait(listener, seconds) else { throw TestTimeout(description: "no client connected to \(path)") }
        client = Glibc.accept(listener, nil, nil)
        guard client >= 0 else { throw TestTimeout(description: "accept: \(errno)") }
    }

    private func sendNow(_ bytes: [UInt8]) throws {
        let sent = bytes.withUnsafeBytes { Glibc.send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent == bytes.count else { throw TestTimeout(description: "send: \(errno)") }
    }

    private func receiveNow(within seconds: Double) throws -> [UInt8] {
        guard wait(client, seconds) else { throw TestTimeout(description: "nothing received on \(path)") }
        var buffer = [UInt8](repeating: 0, count: 65_600)
        let count = buffer.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count, 0) }
        guard count >= 0 else { throw TestTimeout(description: "recv: \(errno)") }
        return Array(buffer[0..<count])
    }

    /// Hangs up on the client (the listener stays).
    public func hangUp() {
        if client >= 0 { Glibc.close(client) }
        client = -1
    }

    public func close() {
        hangUp()
        if listener >= 0 {
            Glibc.close(listener)
            unlink(path)
        }
        listener = -1
    }

    private func wait(_ fd: Int32, _ seconds: Double) -> Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, Int32(seconds * 1000)) == 1
    }
}
