import EventLoop
import Gateway
import LocalSystem
import Synchronization

/// systemd's notifications as the last service of `gattway run`: `READY=1` with the adapter's
/// condition in `STATUS=` once everything before it started, and the watchdog's pings from the
/// event loop from then on (``SystemdWatchdog``) until the stop. (`STOPPING=1` is the process's:
/// ``GatewayProcess`` says it as every stop begins, also after a start that failed.)
public final class SystemdService: Service {
    public let name = "systemd"
    let notifier: SystemdNotifier
    let loop: EventLoop
    let core: CoreService?
    let environment: [String: String]
    private let watchdog = Mutex<SystemdWatchdog?>(nil)

    /// - Parameter core: whose adapter condition `STATUS=` says (nil: just `running`).
    public init(
        notifier: SystemdNotifier, loop: EventLoop, core: CoreService?,
        environment: [String: String] = LocalEnvironment.all
    ) {
        self.notifier = notifier
        self.loop = loop
        self.core = core
        self.environment = environment
    }

    public func start() async throws {
        let adapter = await core?.gateway?.adapterStatus
        notifier.notify("READY=1\nSTATUS=" + Self.status(adapter))
        let started = SystemdWatchdog(notifier, loop: loop, environment: environment)
        watchdog.withLock { $0 = started }
    }

    public func stop(within deadline: StopDeadline) async -> String? {
        watchdog.withLock { $0 }?.stop()
        return nil
    }

    /// systemd's `STATUS=` for the adapter's condition: `running: hci0 (…) is powered on`, or
    /// `running, waiting for the adapter: hci0 (…) is powered off — bluetoothctl power on …`.
    public static func status(_ adapter: BLEAdapterStatus?) -> String {
        guard let adapter else { return "running" }
        return adapter.usable ? "running: \(adapter.message)" : "running, waiting for the adapter: \(adapter.text)"
    }
}
