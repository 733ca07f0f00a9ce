import EventLoop
import Gateway
import GatewayRuntime
import Synchronization

/// The Home Assistant Bluetooth proxy as a service of `gattway run` (with `bluetooth_proxy`
/// enabled): its own scan on the shared central, its connections within the gateway's connection
/// slots. ``start()`` starts the listener (a listener that cannot bind fails the start: exit 1);
/// ``run()`` runs its background work on the loop; ``stop(within:)`` stops it at the same time as
/// the core, until the deadline's wait: what is not answered by then is cancelled and logged.
final class BluetoothProxyService: Service {
    let name = "Bluetooth proxy"
    let parts: GatewayProcess.ProxyParts
    private let started = Mutex<BluetoothProxy?>(nil)

    init(_ parts: GatewayProcess.ProxyParts) {
        self.parts = parts
    }

    func start() async throws {
        guard let central = parts.central.central, let gateway = parts.core.gateway else {
            throw RunFailure("started before the BlueZ central and the gateway core", isConfiguration: false)
        }
        let proxy = try await BluetoothProxy.start(
            config: parts.config, central: central, gateway: gateway, loop: parts.loop, log: parts.log)
        started.withLock { $0 = proxy }
        let health = parts.health
        _ = try? await parts.loop.submit { health.section = { proxy.healthSection() } }
    }

    /// The proxy's background work (its connections' BlueZ calls, the mDNS announcer), on the loop.
    func run() async throws {
        guard let proxy = started.withLock({ $0 }) else { return }
        await withTaskExecutorPreference(parts.loop.taskExecutor) { await proxy.run() }
    }

    func stop(within deadline: StopDeadline) async -> String? {
        guard let proxy = started.withLock({ $0 }) else { return nil }
        if !(await StopDeadline.bounded(deadline.waitRemaining) { await proxy.stop() }) {
            parts.log(
                .warning,
                "stop: the Bluetooth proxy did not stop within \(String(oneDecimal: deadline.elapsed)) s: "
                    + "its BlueZ and Avahi calls were cancelled")
        }
        return nil
    }
}
