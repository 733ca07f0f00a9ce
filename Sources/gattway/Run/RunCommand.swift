import BlueZ
import EventLoop
import Gateway
import JSON
import LocalSystem
import MQTT
import ProxyBackend

#if canImport(Glibc)
    import Glibc
#endif

/// `gattway run`: the gateway — BlueZ central + parsers + MQTT, as configured in config.json.
///
/// Start-up order: configuration (exit 78 on any problem) → event loop → MQTT client (connects
/// and reconnects in the background, last will = `bridge/state` offline) → central → gateway
/// core → `READY=1` with the adapter's condition in `STATUS=`. Nothing waits for the adapter: an
/// adapter that is off, blocked or missing, a bluetoothd that is gone or a bus that refuses
/// access is a condition the core reports (log, `bridge/health`, `bridge/event`) while the
/// scan waits for it.
/// Shutdown in reverse (SIGINT/SIGTERM), bounded by one deadline (``StopDeadline``: exit within
/// 5 s, status 0): the gateway's jobs are cancelled; the gateway disconnects its devices and
/// publishes `bridge/state` offline at once, then writes what the store-and-forward stage held
/// only in memory to the queue file, while the Bluetooth proxy (when enabled) stops; then MQTT
/// disconnects and the BlueZ managers close. Everything running in the background is a child
/// task of this one, or a handler on the loop (docs/architecture.md): none outlives the stop.
struct RunCommand: Command {
    static let name = "run"
    static let summary = "Run the gateway (the default mode of the systemd service)."
    static let discussion = """
        Reads the configuration (default: ./config.json when present, else /etc/gattway/config.json), \
        connects to BlueZ on the D-Bus system bus (DBUS_SYSTEM_BUS_ADDRESS is honoured) and to the \
        MQTT broker, and runs until SIGINT or SIGTERM, then stops within 5 s (exit 0): links dropped, \
        bridge/state offline, what the broker had not acknowledged written to the state directory. \
        Logs go to stderr with syslog priority \
        prefixes (<3> error … <7> debug). Under systemd (Type=notify) it reports READY=1 and pings \
        the watchdog from the event loop.
        """
    static let options: [Option] = [
        .value("config", "FILE", "The configuration file.", default: "./config.json or /etc/gattway/config.json"),
        .value("log-level", "LEVEL", "error, warning, notice, info or debug.", default: "info"),
        .value(
            "state-dir", "DIR",
            "Where the offline queue, known devices and connections, and bind keys set at run time are kept across restarts (overrides state_directory).",
            default: "config's state_directory, else memory only"),
    ]

    let configPath: String
    let level: GatewayLogger.Level
    let stateDirectory: String?

    init(parsing arguments: ParsedArguments) throws {
        if let path = arguments.value("config") {
            configPath = path
        } else {
            configPath = LocalFile.exists("config.json") ? "config.json" : "/etc/gattway/config.json"
        }
        let levelName = arguments.value("log-level") ?? "info"
        guard let level = GatewayLogger.Level(name: levelName) else {
            throw CLIError.usage(
                "--log-level: \"\(levelName)\" is not a level (expected error, warning, notice, info or debug)")
        }
        self.level = level
        stateDirectory = arguments.value("state-dir")
    }

    func run() async throws -> ExitCode {
        let stderrLog = GatewayLogger.syslog(minimum: level) { standardError($0) }
        let config: GatewayConfig
        do {
            config = try GatewayConfig.load(path: configPath)
        } catch {
            for line in error.lines { stderrLog(.error, "\(configPath): \(line)") }
            return .config
        }
        // Every line from here on, ours and the core's, has the configuration's secrets removed.
        let log = stderrLog.redacting(config.secrets)
        warnIfSecretsAreReadable(config, log: log)
        // No live reload: a stray SIGHUP must not end the service (restart it to apply a new config).
        signal(SIGHUP, SIG_IGN)
        let notifier = SystemdNotifier()
        let loop = EventLoop()
        defer { loop.shutdown() }
        MemoryTrimmer.start(on: loop)

        let client: MQTTClient
        do {
            client = try MQTTClient(configuration: try Self.mqttConfiguration(config), loop: loop)
            // Observed before the start (the registration reaches the loop ahead of it), so that a
            // first connection the broker refuses is logged too; told on the loop thread until
            // the client disconnects.
            client.observeConnectionStates { [weak client] state in
                Self.logConnection(state, client: client, config: config, log: log)
            }
            try await client.start()
        } catch {
            log(.error, "MQTT: \(error)")
            return .config
        }

        var options = CentralOptions(adapter: AdapterSelector(config.bluetooth.adapter))
        let stateDirectory = self.stateDirectory ?? config.stateDirectory
        if let stateDirectory {
            try? LocalFile.createDirectories(stateDirectory)
            options.stateFilePath = stateDirectory + "/central.json"
            options.stateFileProblem = { error in
                if let error {
                    log(
                        .warning,
                        "central.json: \(error); the links and subscriptions to restore after a crash are kept in memory only until it can be written"
                    )
                } else {
                    log(.notice, "central.json: written again")
                }
            }
        }
        let central: CentralManager
        do {
            central = try await CentralManager.start(options: options, on: loop)
        } catch {
            log(.error, "BlueZ: \(error)")
            await client.disconnect()
            return .failure
        }
        // The D-Bus round trip to bluetoothd in bridge/health (ble_latency_ms), measured once per report.
        if config.health.enabled {
            await central.startPinging(every: .milliseconds(Int64(saturating: config.health.interval * 1000)))
        }
        // The peripheral role's manager, on its own adapter when `peripheral.adapter` names one.
        let peripheralAdapter = config.peripheral.adapter ?? config.bluetooth.adapter
        var peripheral: PeripheralManager?
        if config.role.includesPeripheral {
            do {
                // Services and advertising wait for the adapter instead of failing the start.
                var options = PeripheralOptions(adapter: AdapterSelector(peripheralAdapter))
                options.waitingForAdapter = true
                peripheral = try await PeripheralManager.start(options: options, on: loop)
            } catch {
                log(.error, "BlueZ: \(error)")
                await central.close()
                await client.disconnect()
                return .failure
            }
        }
        let termination = SignalSources.termination()
        // The peripheral role's adapter state in the log, told by its manager on the loop thread
        // (the central's adapter is the core's: logged once per change, with what to do).
        let peripheralStateLog = await peripheral?.stateUpdates { state in
            log(.notice, "BlueZ: \(peripheralAdapter) (peripheral) is \(state)")
        }
        // No wait for the adapter: the gateway starts at once (MQTT, bridge topics, health) and
        // says READY=1; its scan and the peripheral role's registrations begin by themselves
        // once the adapter can be used. Meanwhile the adapter's condition, with what to do, is
        // in the log, bridge/health, bridge/event and systemd's STATUS=.
        var code = ExitCode.success
        let stop: StopDeadline
        var peripheralPort: PeripheralBLEPort?
        if let peripheral { peripheralPort = await PeripheralBLEPort(manager: peripheral, log: log) }
        // The core runs on the loop with the central and the client (docs/architecture.md);
        // its jobs run in `jobs` until the stop.
        // The Bluetooth proxy's connections share the core's slots and jobs: its backend is made
        // first and attached to the gateway (which also reports its counters in bridge/health).
        let proxyBackend =
            config.bluetoothProxy.enabled ? ProxyBackend(ble: ProxyBLECentral(central: central), loop: loop) : nil
        let gateway = Gateway(
            config: config, ble: CentralBLEPort(central: central), peripheral: peripheralPort,
            mqtt: ClientMQTTPort(
                client: client, subscriptionQoS: MQTTQoS(rawValue: config.mqtt.subscriptionQoS) ?? .atLeastOnce),
            clock: SystemClock(), loop: loop, logger: log,
            version: BuildInfo.version, stateDirectory: stateDirectory,
            attachment: proxyBackend)
        // The adapter's condition as systemd's STATUS= (`systemctl status gattway`), at each change.
        await gateway.observeAdapter { status in notifier.notify("STATUS=" + Self.status(status)) }
        // The Home Assistant Bluetooth proxy, when enabled: its own scan on the same central,
        // its connections within the gateway's connection slots.
        var proxy: BluetoothProxy?
        if let proxyBackend {
            do {
                proxy = try await BluetoothProxy.start(
                    config: config, central: central, backend: proxyBackend, loop: loop, log: log)
            } catch {
                log(.error, "Bluetooth proxy: \(error)")
                code = .failure
            }
        }
        let (startCode, proxyStarted) = (code, proxy)
        (code, stop) = await withTaskGroup(of: Void.self) { background in
            // The proxy's background work (the mDNS announcer) and the core's jobs (with the
            // proxy's BlueZ calls) are child tasks of this one, on the loop; both end at the
            // stop and are awaited.
            if let proxyStarted {
                background.addTask(executorPreference: loop.taskExecutor) { await proxyStarted.run() }
            }
            let (code, stop) = await withTaskGroup(of: Void.self) { jobs in
                jobs.addTask(executorPreference: loop.taskExecutor) { await gateway.run() }
                var code = startCode
                do {
                    guard code == .success else { throw BluetoothProxyStartError() }
                    try await gateway.start()
                    notifier.notify("READY=1\nSTATUS=" + Self.status(await gateway.adapterStatus))
                    let watchdog = SystemdWatchdog(notifier, loop: loop)
                    let signal = await termination.wait() ?? "cancelled"
                    log(.notice, "\(signal): stopping")
                    watchdog?.stop()
                } catch is BluetoothProxyStartError {
                    // Logged where it happened; the gateway is stopped without having started.
                } catch {
                    log(.error, "gateway: \(error)")
                    // A configuration BlueZ can never accept is a config error: systemd does not
                    // restart on 78 (RestartPreventExitStatus).
                    code = (error as? GatewayStartError)?.isConfiguration == true ? .config : .failure
                }
                notifier.notify("STOPPING=1")
                let stop = StopDeadline.begin()
                // Jobs honour cancellation (their D-Bus calls are cancelled), so this is quick.
                jobs.cancelAll()
                let late = StopDeadline.warning(after: stop.waitRemaining, on: loop) {
                    log(
                        .warning,
                        "stop: the gateway's jobs did not end within \(String(oneDecimal: stop.elapsed)) s")
                }
                await jobs.waitForAll()
                late.cancel()
                return (code, stop)
            }
            // The gateway's stop and the proxy's at once, both within the wait of the stop.
            async let proxyStopped = Self.stop(proxyStarted, within: stop.waitRemaining)
            await gateway.stop(timeout: stop.waitRemaining)
            if !(await proxyStopped) {
                log(
                    .warning,
                    "stop: the Bluetooth proxy did not stop within \(String(oneDecimal: stop.elapsed)) s: "
                        + "its BlueZ and Avahi calls were cancelled")
            }
            background.cancelAll()
            return (code, stop)
        }
        if let peripheral, let peripheralStateLog { await peripheral.stopStateUpdates(peripheralStateLog) }
        // MQTT DISCONNECT (the broker then discards the last will) and the BlueZ managers'
        // close at once; a frozen bluetoothd has its calls cancelled at the deadline.
        let closeTime = stop.closeRemaining
        async let mqttClosed: Void = client.disconnect(timeout: min(StopDeadline.closeLimit, closeTime))
        let bluezClosed = await StopDeadline.bounded(closeTime) { [peripheral] in
            await peripheral?.close()
            await central.close()
        }
        await mqttClosed
        log(
            .notice,
            "stopped in \(String(oneDecimal: stop.elapsed)) s"
                + (bluezClosed ? "" : " (BlueZ did not answer: its calls were cancelled)"))
        return code
    }

    /// The Bluetooth proxy's listener could not start (already logged): the gateway does not run.
    struct BluetoothProxyStartError: Error {}

    /// The largest packet the gateway takes from the broker (MQTT 5): its commands are at most
    /// `commands.max_payload_bytes` (≤ 256 KiB) and `from_topic` values are small state messages,
    /// so nothing it subscribes to needs more; a larger publication is dropped by the broker.
    static let maximumInboundPacket: UInt32 = 1 << 20

    /// The MQTT client configuration from the gateway's settings, with the bridge's last will.
    static func mqttConfiguration(_ config: GatewayConfig) throws -> MQTTConfiguration {
        let settings = config.mqtt
        var configuration = try MQTTConfiguration(url: settings.server, clientID: settings.clientID)
        for url in settings.alternateServers { try configuration.addAlternate(url: url) }
        configuration.keepAlive = Int(saturating: settings.keepalive.rounded())
        configuration.maxQueued = settings.maxQueued
        configuration.protocolVersion = settings.protocolVersion == 5 ? .v5 : .v311
        if configuration.protocolVersion == .v5 { configuration.maximumPacketSize = Self.maximumInboundPacket }
        if let username = settings.username {
            configuration.credentials = MQTTCredentials(username: username, password: settings.password)
        }
        if let tls = settings.tls {
            configuration.tls = MQTTTLSConfiguration(
                caFile: tls.caFile, certificateFile: tls.certificateFile, keyFile: tls.keyFile,
                insecureSkipVerification: tls.insecure)
        }
        configuration.will = ClientMQTTPort.message(Gateway.lastWill(for: config))
        return configuration
    }

    /// The MQTT connection's changes in the log; called by the client on the loop thread.
    static func logConnection(
        _ state: MQTTConnectionState, client: MQTTClient?, config: GatewayConfig, log: GatewayLogger
    ) {
        switch state {
        case .connected:
            if config.mqtt.alternateServers.isEmpty {
                log(.notice, "MQTT: connected to \(config.mqtt.server)")
            } else if let endpoint = client?.assumeLoopIsolated({ $0.endpoint }) {
                log(.notice, "MQTT: connected to \(endpoint)")
            }
        case .disconnected(let error?, let retry):
            log(.warning, "MQTT: \(error)" + (retry.map { "; retrying in \(String(oneDecimal: $0)) s" } ?? ""))
        case .disconnected, .connecting: break
        }
    }

    /// systemd's `STATUS=` for the adapter's condition: `running: hci0 (…) is powered on`, or
    /// `running, waiting for the adapter: hci0 (…) is powered off — bluetoothctl power on …`.
    static func status(_ adapter: BLEAdapterStatus?) -> String {
        guard let adapter else { return "running" }
        return adapter.usable ? "running: \(adapter.message)" : "running, waiting for the adapter: \(adapter.text)"
    }

    /// Stops the proxy (when there is one) within `seconds`: false when it had to be cancelled.
    static func stop(_ proxy: BluetoothProxy?, within seconds: Double) async -> Bool {
        guard let proxy else { return true }
        return await StopDeadline.bounded(seconds) { await proxy.stop() }
    }

    /// Each file with a secret that other users may read gets a warning — the config holding a
    /// password or bind key, `password_file`, the TLS client key (design: secrets never leak; the
    /// files themselves are the user's to protect).
    func warnIfSecretsAreReadable(_ config: GatewayConfig, log: GatewayLogger) {
        for exposure in SecretPermissions.worldReadable(configPath: configPath, config) {
            log(
                .warning,
                "\(exposure.path) is world-readable and holds \(exposure.holds); run: chmod o-r \(exposure.path)")
        }
    }
}
