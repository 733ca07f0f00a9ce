import EventLoop
import LocalSystem
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// `sd_notify(3)` without libsystemd: datagrams to `$NOTIFY_SOCKET` (`READY=1`, `WATCHDOG=1`,
/// `STOPPING=1`, `STATUS=…`). Does nothing when the variable is unset (not started by systemd).
public struct SystemdNotifier: Sendable {
    public let socketPath: String?

    public init(environment: [String: String] = LocalEnvironment.all) {
        socketPath = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The watchdog interval systemd expects pings at, from `$WATCHDOG_USEC` (nil: no watchdog).
    public static func watchdogInterval(environment: [String: String] = LocalEnvironment.all) -> Double? {
        guard let text = environment["WATCHDOG_USEC"], let usec = Double(text), usec > 0 else { return nil }
        if let pid = environment["WATCHDOG_PID"], Int32(pid) != getpid() { return nil }
        return usec / 1_000_000
    }

    /// Sends one notification; failures are ignored (systemd may be gone while we stop).
    public func notify(_ state: String) {
        guard let socketPath else { return }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return }
        defer { close(fd) }
        // An abstract socket is written "@name" (UnixSocketAddress).
        guard let address = UnixSocketAddress(socketPath) else { return }
        let payload = Array(state.utf8)
        _ = address.withSockaddr { sockaddr, length in
            payload.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), sockaddr, length) }
        }
    }
}

/// Pings the systemd watchdog (`WATCHDOG=1`) at half its interval from a timer of the event loop,
/// so a wedged loop stops the pings and systemd restarts the service. No task: the timer arms
/// itself again after each ping until ``stop()``.
public final class SystemdWatchdog: Sendable {
    private let notifier: SystemdNotifier
    private let loop: EventLoop
    private let interval: Double
    private let stopped = Atomic(false)

    /// Starts pinging; nil when systemd expects no pings (``SystemdNotifier/watchdogInterval(environment:)``).
    public init?(_ notifier: SystemdNotifier, loop: EventLoop, environment: [String: String] = LocalEnvironment.all) {
        guard let interval = SystemdNotifier.watchdogInterval(environment: environment) else { return nil }
        self.notifier = notifier
        self.loop = loop
        self.interval = interval / 2
        loop.execute { [self] in schedule() }
    }

    /// No more pings (the next timer finds this and does not ping).
    public func stop() {
        stopped.store(true, ordering: .relaxed)
    }

    private func schedule() {
        _ = loop.addTimer(after: interval) { [self] in
            guard !stopped.load(ordering: .relaxed) else { return }
            notifier.notify("WATCHDOG=1")
            schedule()
        }
    }
}
