import BlueZ
import EventLoop
import Gateway
import LocalSystem

#if canImport(Glibc)
    import Glibc
#endif

/// `gattway run`: the gateway — BlueZ central + parsers + MQTT, as configured in config.json — as
/// one process: the configuration, the event loop, and the ``ServiceGroup`` of its services.
///
/// Start-up order: configuration (exit 78 on any problem) → event loop → MQTT client (connects
/// and reconnects in the background, last will = `bridge/state` offline) → central → peripheral
/// (with that role) → Bluetooth proxy (when enabled; the core it shares connection slots with is
/// made here) → gateway core → web server (with `web.enabled`) → `READY=1` with the adapter's condition in `STATUS=`. Nothing waits for the adapter: an adapter that is off,
/// blocked or missing, a bluetoothd that is gone or a bus that refuses access is a condition the
/// core reports (log, `bridge/health`, `bridge/event`) while the scan waits for it.
///
/// Shutdown in reverse (SIGINT/SIGTERM), bounded by one deadline (``StopDeadline``: exit within
/// 5 s, status 0): `STOPPING=1`; the gateway's jobs are cancelled; the gateway disconnects its
/// devices and publishes `bridge/state` offline at once, then writes what the store-and-forward
/// stage held only in memory to the queue file, while the Bluetooth proxy (when enabled) stops;
/// then MQTT disconnects and the BlueZ managers close. Everything running in the background is
/// a child task of the group, or a handler on the loop (docs/architecture.md): none outlives the
/// stop.
public struct GatewayProcess: Sendable {
    /// What `gattway run`'s command line says.
    public struct Options: Sendable {
        public var configPath: String
        public var level: GatewayLogger.Level
        /// `--state-dir`: overrides the configuration's `state_directory`.
        public var stateDirectory: String?

        public init(configPath: String, level: GatewayLogger.Level, stateDirectory: String?) {
            self.configPath = configPath
            self.level = level
            self.stateDirectory = stateDirectory
        }
    }

    public let options: Options
    let errorOutput: @Sendable (String) -> Void

    /// - Parameter errorOutput: writes log lines (stderr, unbuffered).
    public init(_ options: Options, errorOutput: @escaping @Sendable (String) -> Void) {
        self.options = options
        self.errorOutput = errorOutput
    }

    /// Runs the gateway until SIGTERM or SIGINT; returns the exit code.
    public func run() async -> ExitCode {
        let stderrLog = GatewayLogger.syslog(minimum: options.level, write: errorOutput)
        let config: GatewayConfig
        do {
            config = try GatewayConfig.load(path: options.configPath)
        } catch {
            for line in error.lines { stderrLog(.error, "\(options.configPath): \(line)") }
            return ExitCode(for: error)
        }
        // Every line from here on, ours and the core's, has the configuration's secrets removed.
        // The web page's log view keeps the last lines too (LogTail), after the redaction.
        let logTail = config.web.enabled ? LogTail() : nil
        let log = (logTail?.keeping(stderrLog, minimum: options.level) ?? stderrLog).redacting(config.secrets)
        warnIfSecretsAreReadable(config, log: log)
        // No live reload: a stray SIGHUP must not end the service (restart it to apply a new config).
        signal(SIGHUP, SIG_IGN)
        let termination = SignalSources.termination()
        let loop = EventLoop()
        defer { loop.shutdown() }
        MemoryTrimmer.start(on: loop)
        // STOPPING=1 first thing at every stop, also one after a start that failed.
        let notifier = SystemdNotifier()
        let group = ServiceGroup(
            services(config, loop: loop, log: log, notifier: notifier, logTail: logTail), termination: termination,
            log: log,
            beginStop: {
                notifier.notify("STOPPING=1")
                return StopDeadline.begin()
            })
        return await group.run()
    }

    /// `gattway run`'s services, in the order they start; stages stop in reverse, the services
    /// of a stage at the same time.
    func services(
        _ config: GatewayConfig, loop: EventLoop, log: GatewayLogger, notifier: SystemdNotifier = SystemdNotifier(),
        logTail: LogTail? = nil
    ) -> [ServiceGroup.Stage] {
        let stateDirectory = options.stateDirectory ?? config.stateDirectory
        let mqtt = MQTTService(config: config, loop: loop, log: log)
        let central = BlueZCentralService(
            config: config, stateDirectory: stateDirectory, loop: loop, log: log,
            radioEndpoint: .current)
        let peripheral =
            config.role.includesPeripheral
            ? BlueZPeripheralService(
                adapter: config.peripheral.adapter ?? config.bluetooth.adapter, loop: loop, log: log) : nil
        let webCounters = config.web.enabled ? WebCounters() : nil
        let core = CoreService(
            config: config, stateDirectory: stateDirectory, loop: loop, log: log, mqtt: mqtt, central: central,
            peripheral: peripheral, notifier: notifier, webCounters: webCounters)
        // The proxy starts first: a listener that cannot bind stops the process before the core
        // publishes anything.
        var gateway: [any Service] = [core]
        let proxy =
            config.bluetoothProxy.enabled
            ? BluetoothProxyService(
                config: config, loop: loop, log: log, central: central, core: core, stateDirectory: stateDirectory)
            : nil
        if let proxy { gateway.insert(proxy, at: 0) }
        var stages = [
            // The connections: the last step of the stop, together.
            ServiceGroup.Stage([mqtt, central] + (peripheral.map { [$0] } ?? []), window: .close),
            // The Bluetooth proxy and the core: stopped together, within the wait for BlueZ and the broker.
            ServiceGroup.Stage(gateway, window: .wait),
        ]
        if let webCounters {
            // The web server serves the core's state: it starts after the core and stops before it.
            stages.append(
                ServiceGroup.Stage(
                    [
                        WebService(
                            config: config, loop: loop, log: log, core: core, mqtt: mqtt, counters: webCounters,
                            logTail: logTail, configPath: options.configPath, proxy: proxy)
                    ],
                    window: .wait))
        }
        stages.append(ServiceGroup.Stage([SystemdService(notifier: notifier, loop: loop, core: core)], window: .wait))
        return stages
    }

    /// Each file with a secret that other users may read gets a warning — the config holding a
    /// password or bind key, `password_file`, the TLS client key (design: secrets never leak; the
    /// files themselves are the user's to protect).
    func warnIfSecretsAreReadable(_ config: GatewayConfig, log: GatewayLogger) {
        for exposure in SecretPermissions.worldReadable(configPath: options.configPath, config) {
            log(
                .warning,
                "\(exposure.path) is world-readable and holds \(exposure.holds); run: chmod o-r \(exposure.path)")
        }
    }
}
