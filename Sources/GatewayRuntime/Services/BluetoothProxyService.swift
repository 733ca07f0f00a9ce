import EventLoop
import Gateway
import Synchronization

/// The Home Assistant Bluetooth proxy as a service of `gattway run` (with `bluetooth_proxy`
/// enabled): its own scan on the shared central, its connections within the gateway's connection
/// slots. It starts before the core: ``start()`` starts the listener (a listener that cannot bind
/// fails the start, exit 1, and the core never starts);
/// ``run()`` runs its background work on the loop; ``stop(within:)`` stops it at the same time as
/// the core, until the deadline's wait: what is not answered by then is cancelled and logged.
public final class BluetoothProxyService: Service {
    public let name = "Bluetooth proxy"
    let config: GatewayConfig
    let loop: EventLoop
    let log: GatewayLogger
    let central: BlueZCentralService
    let core: CoreService
    let health: ProxyHealth
    private let started = Mutex<BluetoothProxy?>(nil)

    /// - Parameters:
    ///   - central: whose central the proxy scans and connects with.
    ///   - core: whose connection slots the proxy's connections share (made at the proxy's start).
    ///   - health: where the proxy's `bluetooth_proxy` section of `bridge/health` goes.
    public init(
        config: GatewayConfig, loop: EventLoop, log: GatewayLogger, central: BlueZCentralService, core: CoreService,
        health: ProxyHealth
    ) {
        self.config = config
        self.loop = loop
        self.log = log
        self.central = central
        self.core = core
        self.health = health
    }

    public func start() async throws {
        guard let central = central.central else {
            throw RunFailure("started before the BlueZ central", isConfiguration: false)
        }
        // Made here, before the core starts: the proxy shares its connection slots, and the core's
        // bridge topics go out only once the proxy listens.
        let gateway = try core.makeGateway()
        let proxy = try await BluetoothProxy.start(
            config: config, central: central, gateway: gateway, loop: loop, log: log)
        started.withLock { $0 = proxy }
        let health = self.health
        _ = try? await loop.submit { health.section = { proxy.healthSection() } }
    }

    /// The proxy's background work (its connections' BlueZ calls, the mDNS announcer), on the loop.
    public func run() async throws {
        guard let proxy = started.withLock({ $0 }) else { return }
        await withTaskExecutorPreference(loop.taskExecutor) { await proxy.run() }
    }

    public func stop(within deadline: StopDeadline) async -> String? {
        guard let proxy = started.withLock({ $0 }) else { return nil }
        if !(await StopDeadline.bounded(deadline.waitRemaining) { await proxy.stop() }) {
            log(
                .warning,
                "stop: the Bluetooth proxy did not stop within \(String(oneDecimal: deadline.elapsed)) s: "
                    + "its BlueZ and Avahi calls were cancelled")
        }
        return nil
    }
}
