import ESPHomeAPI
import EventLoop
import Gateway
import ProxyBackend
import Synchronization

/// The Home Assistant Bluetooth proxy as a service of `gattway run` (with `bluetooth_proxy`
/// enabled): its own scan on the shared centrals (every adapter, one scanner), its connections within the gateway's connection
/// slots and jobs. It starts before the core: ``start()`` makes the proxy's backend
/// (``ProxyBackend``), then the core with the backend as its attachment (the core reports the
/// proxy's counters in `bridge/health` and runs its BlueZ calls as jobs), then starts the listener
/// (a listener that cannot bind fails the start, exit 1, and the core never starts);
/// ``run()`` runs its background work on the loop; ``stop(within:)`` stops it at the same time as
/// the core, until the deadline's wait: what is not answered by then is cancelled and logged.
public final class BluetoothProxyService: Service {
    public let name = "Bluetooth proxy"
    let config: GatewayConfig
    let loop: EventLoop
    let log: GatewayLogger
    let central: BlueZCentralService
    let core: CoreService
    /// Where a key set by a client is kept (`bluetooth_proxy.provisioning`).
    let stateDirectory: String?
    private let started = Mutex<BluetoothProxy?>(nil)

    /// - Parameters:
    ///   - central: whose central the proxy scans and connects with.
    ///   - core: whose connection slots and jobs the proxy's connections share (made at the proxy's
    ///     start, with the proxy's backend attached).
    ///   - stateDirectory: where the key a client sets is kept (needed with `provisioning`).
    public init(
        config: GatewayConfig, loop: EventLoop, log: GatewayLogger, central: BlueZCentralService, core: CoreService,
        stateDirectory: String? = nil
    ) {
        self.config = config
        self.loop = loop
        self.log = log
        self.central = central
        self.core = core
        self.stateDirectory = stateDirectory
    }

    /// The proxy's API server once started (loop-confined: use it on the loop thread).
    var server: APIServer? { started.withLock { $0 }?.server }

    public func start() async throws {
        let keyStore = try BluetoothProxy.keyStore(config.bluetoothProxy, stateDirectory: stateDirectory)
        guard let adapters = central.adapters else {
            throw RunFailure("started before the BlueZ central", isConfiguration: false)
        }
        // The backend first, then the core it is attached to (made here, before the core starts:
        // the core's bridge topics go out only once the proxy listens), then the listener.
        let backend = ProxyBackend(
            ble: ProxyBLECentral(adapters: adapters, pairingTimeout: config.bluetooth.pairingTimeout, log: log),
            loop: loop)
        _ = try core.makeGateway(attachment: backend)
        let proxy = try await BluetoothProxy.start(
            config: config, adapters: adapters, backend: backend, keyStore: keyStore, loop: loop, log: log)
        started.withLock { $0 = proxy }
    }

    /// The proxy's background work (the mDNS announcer), on the loop; its connections' BlueZ calls
    /// are the core's jobs.
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
