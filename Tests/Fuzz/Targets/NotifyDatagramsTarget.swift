import BlueZ
import EventLoop
import Glibc
import Synchronization

extension FuzzTargets {
    /// `AcquireNotify` datagrams — what a device notifies, relayed by bluetoothd (or sent by
    /// whatever holds the other end of the socket) — through a real `SOCK_SEQPACKET` pair into
    /// the central's ``NotifySocket`` on a real ``EventLoop``, and from there through a
    /// flow-controlled ``NotificationChannel`` to a consumer. See ``NotifyDatagramsFuzz``.
    static let notifyDatagrams = FuzzTarget(
        name: "notify-datagrams",
        summary: "AcquireNotify datagrams of any size over a socketpair into NotifySocket and NotificationChannel",
        seeds: { NotifyDatagramsFuzz.seeds },
        run: { NotifyDatagramsFuzz.run($0) })
}

/// The driver of ``FuzzTargets/notifyDatagrams``.
///
/// Encoding: the MTU (u16 into ``mtus``, past it the next u16 itself), the channel's high-water
/// mark (byte), flags (bit 0: the sender closes its end at the end), then up to 12 datagrams:
/// a size choice (byte into ``sizes``, past it a u16) and a fill pattern chunk.
///
/// Properties: no trap; every datagram that can be a notification (up to the socket's buffer,
/// ``NotifySocket/capacity(mtu:)``) reaches the consumer whole and in order — an empty one
/// too — and a longer one is dropped and counted, never handed on cut; the socket closes
/// (once) only when the sender closed its end; nothing stalls (flow control resumes).
enum NotifyDatagramsFuzz {
    static let sentinel: [UInt8] = [0xEE, 0xFF, 0x5E]
    static let mtus = [23, 185, 247, 517, 65_535, 0, -1, Int.max, Int.min]
    static let sizes = [0, 1, 20, 244, 514, 517, 533, 534, 2048, 65_535]

    /// One loop thread for every input (each input has its own sockets and channel).
    static let loop = EventLoop(name: "fuzz-notify")

    /// Runs the consumer task's jobs on the loop thread: the fuzz callback blocks a thread of the
    /// cooperative pool (in the tests, beside other blocking fuzz callbacks on a 2-core machine),
    /// so a consumer on the pool could starve.
    final class LoopTaskExecutor: TaskExecutor {
        func enqueue(_ job: consuming ExecutorJob) {
            let job = UnownedJob(job)
            loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
        }
    }

    static let onLoop = LoopTaskExecutor()

    /// What the loop thread and the consumer task hand back.
    final class Outcome: Sendable {
        struct State {
            var values: [[UInt8]] = []
            var closes = 0
            var consumerDone = false
        }
        let state = Mutex(State())
        /// The socket: touched on the loop thread only (it is loop-confined).
        nonisolated(unsafe) var socket: NotifySocket?
    }

    static func run(_ bytes: [UInt8]) {
        var input = FuzzInput(bytes)
        let choice = input.index(mtus.count + 1)
        let mtu = choice < mtus.count ? mtus[choice] : Int(input.uint16())
        let highWater = 1 + Int(input.byte() % 16)
        let closePeer = input.bool()
        var datagrams: [[UInt8]] = []
        while !input.isEmpty, datagrams.count < 12 {
            let sizeChoice = Int(input.byte())
            let size =
                sizeChoice < sizes.count ? sizes[sizeChoice] : sizeChoice < 200 ? sizeChoice : Int(input.uint16())
            let pattern = input.chunk(limit: 8)
            datagrams.append(
                (0..<size).map { pattern.isEmpty ? UInt8(truncatingIfNeeded: $0 &* 31) : pattern[$0 % pattern.count] })
        }
        var fds: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0 else {
            fatalError("socketpair: \(errno)")
        }
        let (ours, peer) = (fds[0], fds[1])
        var size: Int32 = 1 << 20
        _ = setsockopt(peer, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        let outcome = Outcome()
        let channel = NotificationChannel(highWater: highWater) {
            loop.execute { outcome.socket?.resume() }
        }
        let opened = Atomic<Bool>(false)
        loop.execute {
            let socket = NotifySocket(
                fd: ours, mtu: mtu, loop: loop,
                onDatagram: { bytes in
                    if channel.push(bytes) { outcome.socket?.pause() }
                },
                onClose: {
                    outcome.state.withLock { $0.closes += 1 }
                    channel.finish(throwing: nil)
                })
            outcome.socket = socket
            opened.store(true, ordering: .releasing)
        }
        while !opened.load(ordering: .acquiring) { usleep(50) }
        let capacity = NotifySocket.capacity(mtu: mtu)
        let consumer = Task(executorPreference: onLoop) {
            while let value = try? await channel.next() { outcome.state.withLock { $0.values.append(value) } }
            outcome.state.withLock { $0.consumerDone = true }
        }
        var expected: [[UInt8]] = []
        var oversized = 0
        // A last small datagram: when it arrives, every datagram before it was read (dropped or
        // handed on), so the drop count can be compared.
        for datagram in datagrams + [sentinel] {
            var tries = 0
            while true {
                let sent = datagram.withUnsafeBytes {
                    send(peer, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL))
                }
                if sent >= 0 {
                    fuzzProperty(sent == datagram.count, "a datagram of \(datagram.count) bytes went out as \(sent)")
                    if datagram.count <= capacity { expected.append(datagram) } else { oversized += 1 }
                    break
                }
                if errno == EMSGSIZE { break }
                tries += 1
                fuzzProperty(
                    tries < 200_000,
                    "the peer could not send for 10 s: the reader stalled (flow control never resumed)")
                usleep(50)
            }
        }
        // Wait (bounded) until the consumer has every value; then the peer may hang up (after
        // the values: an empty datagram sent just before the hang-up reads like the end).
        // Generous: in the tests this shares two cores with daemons and other fuzz targets.
        let deadline = EventLoop.now() + 15_000_000_000
        while true {
            let (count, done) = outcome.state.withLock { ($0.values.count, $0.consumerDone) }
            if done || count >= expected.count { break }
            fuzzProperty(EventLoop.now() < deadline, "\(count) of \(expected.count) values arrived in 15 s")
            usleep(50)
        }
        if closePeer {
            Glibc.close(peer)
            let closedAt = EventLoop.now()
            while !outcome.state.withLock({ $0.consumerDone }) {
                fuzzProperty(
                    EventLoop.now() < closedAt + 15_000_000_000,
                    "the stream did not end within 15 s of the peer closing")
                usleep(50)
            }
        }
        let (values, closes) = outcome.state.withLock { ($0.values, $0.closes) }
        fuzzProperty(
            values.count == expected.count,
            "\(values.count) values for \(expected.count) datagrams that fit (\(datagrams.map(\.count)), capacity \(capacity))"
        )
        for (index, (value, wanted)) in zip(values, expected).enumerated() {
            fuzzProperty(value == wanted, "value \(index): \(value.count) bytes, the datagram had \(wanted.count)")
        }
        fuzzProperty(
            closes == (closePeer ? 1 : 0),
            "the socket closed \(closes) times (the peer \(closePeer ? "closed" : "did not close"))")
        // Tear down on the loop thread (the socket is loop-confined).
        let closed = Atomic<Bool>(false)
        let sentOversized = oversized
        loop.execute {
            let oversized = sentOversized
            fuzzProperty(
                outcome.socket?.oversizedDrops == oversized,
                "\(outcome.socket?.oversizedDrops ?? -1) oversized datagrams counted, \(oversized) sent")
            outcome.socket?.close()
            outcome.socket = nil
            closed.store(true, ordering: .releasing)
        }
        while !closed.load(ordering: .acquiring) { usleep(50) }
        channel.terminate()
        consumer.cancel()
        if !closePeer { Glibc.close(peer) }
    }

    /// Real shapes: a battery level, heart-rate measurements at the default and a large MTU, an
    /// empty notification, one of the MTU's size, the 65,535-byte datagram, a flood past the
    /// high-water mark.
    static let seeds: [[UInt8]] = {
        func seed(mtu: Int, highWater: UInt8, close: Bool, _ datagrams: [(size: UInt8, pattern: [UInt8])]) -> [UInt8] {
            var builder = FuzzInputBuilder()
            builder.index(mtus.firstIndex(of: mtu) ?? 0)
            builder.byte(highWater)
            builder.bool(close)
            for datagram in datagrams {
                builder.byte(datagram.size)
                builder.chunk(datagram.pattern)
            }
            return builder.bytes
        }
        return [
            seed(mtu: 23, highWater: 4, close: true, [(1, [0x5E])]),
            seed(mtu: 23, highWater: 1, close: false, [(2, [0x16, 0x48]), (2, [0x16, 0x49]), (2, [0x16, 0x4A])]),
            seed(mtu: 517, highWater: 2, close: true, [(3, [0x10]), (4, [0x11]), (0, []), (5, [0x12])]),
            seed(mtu: 247, highWater: 8, close: true, [(6, []), (7, []), (8, [0xAA, 0x55])]),
            seed(mtu: 65_535, highWater: 3, close: false, [(9, [1, 2, 3]), (1, [9])]),
            seed(mtu: 23, highWater: 2, close: true, Array(repeating: (3, [0x42]), count: 12)),
            seed(mtu: Int.max, highWater: 2, close: true, [(2, [1])]),
        ]
    }()
}
