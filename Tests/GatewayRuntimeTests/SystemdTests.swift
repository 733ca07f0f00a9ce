import EventLoop
import Foundation
import Gateway
import GatewayRuntime
import LocalSystem
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("sd_notify: what systemd receives on its notification socket")
struct SystemdTests {
    @Test("notify sends each state as one datagram to $NOTIFY_SOCKET, a path or an abstract name")
    func datagrams() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "notify-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let socket = try DatagramSocket(path: directory.appendingPathComponent("notify").path)
        let notifier = SystemdNotifier(environment: ["NOTIFY_SOCKET": socket.path])
        notifier.notify("READY=1\nSTATUS=running")
        notifier.notify("STOPPING=1")
        #expect(try socket.receive() == "READY=1\nSTATUS=running")
        #expect(try socket.receive() == "STOPPING=1")

        let name = "gattway-test-\(UUID().uuidString.prefix(8))"
        let abstract = try DatagramSocket(abstract: name)
        SystemdNotifier(environment: ["NOTIFY_SOCKET": "@" + name]).notify("WATCHDOG=1")
        #expect(try abstract.receive() == "WATCHDOG=1")
        #expect(SystemdNotifier(environment: [:]).socketPath == nil, "not under systemd: nothing is sent")
    }

    @Test("the watchdog interval is half of WATCHDOG_USEC, and none for another process's WATCHDOG_PID")
    func watchdogInterval() {
        #expect(SystemdNotifier.watchdogInterval(environment: ["WATCHDOG_USEC": "20000000"]) == 20)
        #expect(
            SystemdNotifier.watchdogInterval(environment: ["WATCHDOG_USEC": "200000", "WATCHDOG_PID": "\(getpid())"])
                == 0.2)
        #expect(SystemdNotifier.watchdogInterval(environment: ["WATCHDOG_USEC": "200000", "WATCHDOG_PID": "1"]) == nil)
        #expect(SystemdNotifier.watchdogInterval(environment: [:]) == nil)
    }

    @Test(
        "SystemdService: READY=1 with STATUS= at its start, WATCHDOG=1 from the loop at half the interval, no ping after its stop"
    )
    func service() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "notify-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let socket = try DatagramSocket(path: directory.appendingPathComponent("notify").path)
        let loop = EventLoop()
        defer { loop.shutdown() }
        let service = SystemdService(
            notifier: SystemdNotifier(environment: ["NOTIFY_SOCKET": socket.path]), loop: loop, core: nil,
            environment: ["WATCHDOG_USEC": "100000"])
        let started = Date()
        try await service.start()
        #expect(try socket.receive() == "READY=1\nSTATUS=running")
        for _ in 0..<3 { #expect(try socket.receive() == "WATCHDOG=1") }
        // Three pings at 50 ms.
        #expect(Date().timeIntervalSince(started) >= 0.14)
        _ = await service.stop(within: StopDeadline())
        // A ping already on its way may still come; none after that.
        _ = try socket.receive(timeout: 0.06)
        #expect(try socket.receive(timeout: 0.3) == nil)
    }

    @Test("STATUS= says the adapter's condition and what to do while it cannot be used")
    func status() {
        #expect(SystemdService.status(nil) == "running")
        let on = BLEAdapterStatus(
            adapter: "hci0", state: "powered_on", usable: true, message: "hci0 is powered on", fix: nil)
        #expect(SystemdService.status(on) == "running: hci0 is powered on")
        let off = BLEAdapterStatus(
            adapter: "hci0", state: "powered_off", usable: false, message: "hci0 is powered off",
            fix: "bluetoothctl power on")
        #expect(SystemdService.status(off) == "running, waiting for the adapter: \(off.text)")
        #expect(off.text.contains("bluetoothctl power on"))
    }
}

/// A unix datagram socket bound like systemd's notification socket, read with a timeout.
final class DatagramSocket: Sendable {
    let path: String
    private let fd: Int32

    /// An abstract socket (`@name` in `$NOTIFY_SOCKET`: a leading NUL byte, no file).
    convenience init(abstract name: String) throws {
        try self.init(path: "@" + name)
    }

    init(path: String) throws {
        self.path = path
        guard let address = UnixSocketAddress(path) else { throw SocketError(text: "socket path \(path)") }
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SocketError(text: "socket: errno \(errno)") }
        let bound = address.withSockaddr { bind(fd, $0, $1) }
        guard bound == 0 else {
            close(fd)
            throw SocketError(text: "bind \(path): errno \(errno)")
        }
    }

    deinit { close(fd) }

    /// The next datagram, or nil when none comes within `timeout` seconds.
    func receive(timeout: Double = 5) throws -> String? {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, Int32(timeout * 1000)) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = recv(fd, &buffer, buffer.count, 0)
        guard count >= 0 else { throw SocketError(text: "recv: errno \(errno)") }
        return String(decoding: buffer.prefix(count), as: UTF8.self)
    }

    struct SocketError: Error {
        let text: String
    }
}
