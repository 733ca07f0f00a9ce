import BlueZ
import EventLoop
import Glibc
import Synchronization
import Testing

/// `AcquireNotify` sockets as the fuzz target notify-datagrams found them: an empty notification
/// ended the subscription, a datagram longer than the buffer was handed on cut, and a hostile
/// MTU overflowed the buffer size (Tests/Fixtures/fuzz/notify-datagrams).
@Suite("AcquireNotify socket: datagrams of any size")
struct NotifySocketTests {
    /// What the socket handed on, from the loop thread.
    final class Received: Sendable {
        let state = Mutex<(values: [[UInt8]], closes: Int)>(([], 0))
        var values: [[UInt8]] { state.withLock { $0.values } }
        var closes: Int { state.withLock { $0.closes } }
    }

    /// A socket on a socketpair's one end; returns the other end and the socket's drops (read on
    /// the loop) after `body` sent what it wanted and the values arrived.
    func withSocket(mtu: Int, expecting count: Int, _ body: (Int32) -> Void) async throws -> (Received, Int) {
        let loop = EventLoop(name: "notify-test")
        defer { loop.shutdown() }
        var fds: [Int32] = [-1, -1]
        try #require(socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0)
        let received = Received()
        let (ours, peer) = (fds[0], fds[1])
        let socket = try await loop.submit {
            UncheckedBox(
                NotifySocket(
                    fd: ours, mtu: mtu, loop: loop,
                    onDatagram: { value in received.state.withLock { $0.values.append(value) } },
                    onClose: { received.state.withLock { $0.closes += 1 } }))
        }
        body(peer)
        // Deadlines on the clock, not counts of 1 ms sleeps: on a loaded machine (the whole suite
        // in parallel on two cores) a sleep takes much longer and the loop thread runs late.
        let clock = ContinuousClock()
        var deadline = clock.now + .seconds(15)
        while received.values.count < count, clock.now < deadline { try await Task.sleep(for: .milliseconds(2)) }
        Glibc.close(peer)
        deadline = clock.now + .seconds(15)
        while received.closes == 0, clock.now < deadline { try await Task.sleep(for: .milliseconds(2)) }
        let drops = try await loop.submit { socket.value.oversizedDrops }
        return (received, drops)
    }

    /// Carries the loop-confined socket to the test and back to the loop.
    struct UncheckedBox<T>: @unchecked Sendable {
        let value: T
        init(_ value: T) { self.value = value }
    }

    static func send(_ fd: Int32, _ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    @Test("an empty notification is an empty value, not the end of the subscription")
    func emptyDatagram() async throws {
        let (received, _) = try await withSocket(mtu: 23, expecting: 3) { peer in
            Self.send(peer, [1])
            Self.send(peer, [])
            Self.send(peer, [2, 3])
        }
        #expect(received.values == [[1], [], [2, 3]])
        #expect(received.closes == 1, "closed once, when the peer hung up")
    }

    @Test("a datagram longer than any notification is dropped and counted, not handed on cut")
    func oversizedDatagram() async throws {
        let (received, drops) = try await withSocket(mtu: 23, expecting: 1) { peer in
            Self.send(peer, [UInt8](repeating: 0xAB, count: 2048))
            Self.send(peer, [7])
        }
        #expect(received.values == [[7]])
        #expect(drops == 1)
    }

    @Test(
        "the buffer size is bounded whatever MTU bluetoothd reports",
        arguments: [Int.max, Int.min, -1, 0, 23, 517, 65_535, 1 << 40])
    func capacity(mtu: Int) {
        let capacity = NotifySocket.capacity(mtu: mtu)
        #expect(capacity >= 517 + 16)
        #expect(capacity <= 65_535 + 16)
    }
}
