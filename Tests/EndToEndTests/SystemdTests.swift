import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `gattway run` under systemd (`Type=notify`, `WatchdogSec`, deploy/gattway.service): what it
/// tells systemd on `$NOTIFY_SOCKET`, read from a datagram socket as systemd would.
@Suite("End to end: under systemd")
struct SystemdTests {
    @Test(
        "READY=1 once running, WATCHDOG=1 again and again (a timer of the event loop, at half of WATCHDOG_USEC), STOPPING=1 at SIGTERM, exit 0"
    )
    func notifications() async throws {
        let directory = try TemporaryDirectory.make(prefix: "systemd")
        defer { try? FileManager.default.removeItem(at: directory) }
        let socket = try NotifySocketServer(path: directory.appendingPathComponent("notify").path)
        try await EndToEnd.run(
            config: StoreAndForwardTests.config(),
            environment: ["NOTIFY_SOCKET": socket.path, "WATCHDOG_USEC": "200000"]
        ) { e2e in
            try await socket.next(containing: "READY=1")
            // A ping every 100 ms: the timer arms itself again after each one.
            for _ in 0..<5 { try await socket.next(containing: "WATCHDOG=1") }
            let (status, _) = try await StopTests.stop(e2e.gateway, with: SIGTERM)
            #expect(status == 0, "exit status \(status)")
            try await socket.next(containing: "STOPPING=1")
        }
    }
}

/// A unix datagram socket bound at `path`, like systemd's notification socket.
final class NotifySocketServer: Sendable {
    let path: String
    private let fd: Int32

    init(path: String) throws {
        self.path = path
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ChildProcessError("socket: errno \(errno)") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8) + [0]) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0 else {
            close(fd)
            throw ChildProcessError("bind \(path): errno \(errno)")
        }
    }

    deinit { close(fd) }

    /// Waits (at most `seconds`) for a datagram containing `text` and returns it; others are skipped.
    @discardableResult
    func next(containing text: String, within seconds: Double = 30) async throws -> String {
        let deadline = MessageRecorder.now() + seconds
        var buffer = [UInt8](repeating: 0, count: 4096)
        while MessageRecorder.now() < deadline {
            let count = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            if count > 0 {
                let datagram = String(decoding: buffer[..<count], as: UTF8.self)
                if datagram.contains(text) { return datagram }
                continue
            }
            try await Task.sleep(nanoseconds: 5_000_000)
        }
        throw RecorderTimeout(description: "no \(text) on \(path) within \(seconds) s")
    }
}
