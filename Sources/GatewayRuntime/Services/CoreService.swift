import EventLoop
import Gateway
import JSON
import MQTT
import Synchronization

/// The gateway core as a service, on the loop with the central and the MQTT client
/// (docs/architecture.md). ``start()`` makes the ``Gateway`` over the ports of the services
/// started before it (``CentralBLEPort``, ``ClientMQTTPort``, ``PeripheralBLEPort``; unless the
/// Bluetooth proxy made it already) and starts it (bridge topics, subscriptions, scanning); ``run()`` runs its jobs; ``stop(within:)`` cancels
/// the jobs and awaits them (a warning names a wait that outlasts the deadline's wait), then stops
/// the core: links disconnected and `bridge/state` offline at once, then the store-and-forward
/// queue file written — until the deadline's `waitLimit` after the signal.
public final class CoreService: Service {
    public let name = "gateway"
    let config: GatewayConfig
    let stateDirectory: String?
    let loop: EventLoop
    let log: GatewayLogger
    let mqtt: MQTTService
    let central: BlueZCentralService
    let peripheral: BlueZPeripheralService?
    let notifier: SystemdNotifier
    /// The web server's counters (`bridge/health` `web`); nil without a web server.
    let webCounters: WebCounters?
    private struct State {
        var gateway: Gateway?
        /// ``start()`` returned: the group runs ``run()``.
        var started = false
    }
    private let state = Mutex(State())
    /// Set by ``stop(within:)``: ``run()`` cancels the jobs.
    private let endJobs = OneShot<Void>()
    /// Set by ``run()`` once the jobs ended.
    private let jobsEnded = OneShot<Void>()

    /// - Parameters:
    ///   - notifier: told the adapter's condition as `STATUS=` at each change.
    ///   - webCounters: the web server's counters, reported in `bridge/health` as `web`.
    public init(
        config: GatewayConfig, stateDirectory: String?, loop: EventLoop, log: GatewayLogger, mqtt: MQTTService,
        central: BlueZCentralService, peripheral: BlueZPeripheralService?, notifier: SystemdNotifier,
        webCounters: WebCounters? = nil
    ) {
        self.webCounters = webCounters
        self.config = config
        self.stateDirectory = stateDirectory
        self.loop = loop
        self.log = log
        self.mqtt = mqtt
        self.central = central
        self.peripheral = peripheral
        self.notifier = notifier
    }

    /// The core, once made (``makeGateway()``).
    public var gateway: Gateway? { state.withLock { $0.gateway } }

    /// Makes the core over the ports of the services started before it, once: the Bluetooth
    /// proxy, which starts before the core and shares its connection slots and jobs, makes it
    /// first, with its backend as `attachment` (which must then be the first call).
    public func makeGateway(attachment: (any GatewayAttachment)? = nil) throws -> Gateway {
        guard let client = mqtt.client, let adapters = central.adapters else {
            throw RunFailure("started before the MQTT client and the BlueZ central", isConfiguration: false)
        }
        let (config, loop, log, stateDirectory, notifier) = (
            self.config, self.loop, self.log, self.stateDirectory, self.notifier
        )
        let peripheralPort = peripheral?.port
        let central = self.central
        let web = webCounters
        return state.withLock { state in
            if let gateway = state.gateway {
                precondition(attachment == nil, "the core was made before the feature attached to it")
                return gateway
            }
            let gateway = Gateway(
                config: config, ble: CentralBLEPort(adapters: adapters, scanMode: central.scanMode),
                peripheral: peripheralPort,
                mqtt: ClientMQTTPort(
                    client: client, subscriptionQoS: MQTTQoS(rawValue: config.mqtt.subscriptionQoS) ?? .atLeastOnce),
                clock: SystemClock(), loop: loop, logger: log,
                version: BuildInfo.version, stateDirectory: stateDirectory,
                healthExtra: {
                    [(key: "radio", value: central.radioHealth())]
                        + (web.map { [(key: "web", value: $0.health)] } ?? [])
                },
                attachment: attachment,
                // The adapter's condition as systemd's STATUS= (`systemctl status gattway`), at each change.
                adapterObserver: { status in notifier.notify("STATUS=" + SystemdService.status(status)) },
                // The web page's radio view (what the radio hears and why it is not published).
                radioView: config.web.enabled)
            state.gateway = gateway
            return gateway
        }
    }

    public func start() async throws {
        let gateway = try makeGateway()
        try await gateway.start()
        state.withLock { $0.started = true }
    }

    /// The core's jobs, as child tasks on the loop, until ``stop(within:)`` (or cancellation).
    public func run() async throws {
        guard let gateway else { return }
        let executor = loop.taskExecutor
        await withTaskGroup(of: Void.self) { jobs in
            jobs.addTask(executorPreference: executor) { await gateway.run() }
            _ = await endJobs.wait()
            jobs.cancelAll()
        }
        jobsEnded.set(())
    }

    public func stop(within deadline: StopDeadline) async -> String? {
        let (gateway, started) = state.withLock { ($0.gateway, $0.started) }
        guard let gateway else { return nil }
        // Jobs honour cancellation (their D-Bus calls are cancelled), so this is quick.
        endJobs.set(())
        if started {
            let log = self.log
            let late = StopDeadline.warning(after: deadline.waitRemaining, on: loop) {
                log(.warning, "stop: the gateway's jobs did not end within \(String(oneDecimal: deadline.elapsed)) s")
            }
            _ = await jobsEnded.wait()
            late.cancel()
        }
        await gateway.stop(timeout: deadline.waitRemaining)
        return nil
    }
}
