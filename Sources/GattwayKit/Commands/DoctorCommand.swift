import BlueZ
import EventLoop
import Gateway
import JSON
import LocalSystem

/// `gattway doctor`: checks everything `gattway run` needs and says what to do about each problem.
///
/// Checks, in order: the configuration (present, readable, valid; secrets not world-readable),
/// the state directory (writable, not read-only, free space), the D-Bus system bus, bluetoothd (`org.bluez`) on it, access to it
/// (AccessDenied), the adapter (present and powered, as a ``CentralManager`` sees it), with the
/// peripheral role its adapter's GATT and advertising managers, the broker (one connection with the configured credentials),
/// and with `bluetooth_proxy` enabled the proxy: the running gattway's ESPHome API (a handshake with the configured key,
/// Hello, DeviceInfo), avahi-daemon and the name it announces the proxy under, and the key (``ProxyDiagnosis``); with `web`
/// enabled (the default) whether the web server accepts connections (``WebDiagnosis``). Each check is bounded by `--timeout`.
/// Exit codes: see ``DoctorReport``.
struct DoctorCommand: Command {
    static let name = "doctor"
    static let summary = "Check BlueZ, the adapter, permissions, the broker and the config; explain what is wrong."
    static let discussion = """
        Prints one line per check — ok, warn or fail — with what was found and what to do. Exit \
        status: 0 when nothing failed (warnings allowed), 1 when a check failed, 78 when the \
        configuration is missing, unreadable or invalid (whatever else failed: the other checks \
        then ran on defaults, and fixing the file comes first). Run it as the user the gateway runs \
        as, e.g. sudo -u gattway gattway doctor --config /etc/gattway/config.json --state-dir /var/lib/gattway. \
        The broker check connects with its own client id and no last will, so it is safe while the \
        service runs. With bluetooth_proxy enabled it also talks to the running proxy as Home Assistant \
        would (the encryption key, Hello, DeviceInfo), looks for avahi-daemon on the system bus and \
        asks it under which name the proxy is announced. With web enabled (the default) it checks         that the web server accepts connections on its address.
        """
    static let options: [Option] = [
        .value("config", "FILE", "The configuration file.", default: "./config.json or /etc/gattway/config.json"),
        .value(
            "state-dir", "DIR", "The state directory to check (as given to gattway run).",
            default: "config's state_directory"),
        .value("timeout", "DURATION", "Time limit of each check that waits (bus calls, the broker).", default: "5s"),
        .flag("json", "Print a JSON object instead of text."),
    ]

    let configPath: String
    let stateDirectory: String?
    let timeout: Double
    let json: Bool

    init(parsing arguments: ParsedArguments) throws {
        configPath = arguments.configPath
        stateDirectory = arguments.value("state-dir")
        let timeout = try arguments.duration("timeout") ?? 5
        guard timeout > 0 else { throw CLIError.usage("--timeout: must be more than 0") }
        self.timeout = timeout
        json = arguments.flag("json")
    }

    func run() async throws -> ExitCode {
        var report = DoctorReport()
        let (config, configChecks) = FileDiagnosis.config(path: configPath)
        report.add(configChecks)
        let directory = stateDirectory ?? config?.stateDirectory
        if config != nil || stateDirectory != nil {
            report.add(
                FileDiagnosis.stateDirectory(
                    directory, fromOption: stateDirectory != nil,
                    storeAndForward: config?.storeAndForward ?? StoreAndForwardSettings()))
            report.add(FileDiagnosis.runtimeSecrets(in: directory))
        }

        let loop = EventLoop(name: "gattway-doctor")
        defer { loop.shutdown() }
        let limit = Duration.milliseconds(Int64(saturating: timeout * 1000))
        let adapter = config?.bluetooth.adapter ?? BluetoothSettings().adapter
        var bluez = BlueZDiagnosis(adapter: adapter, timeout: limit, loop: loop)
        if let config, config.role.includesPeripheral {
            bluez.peripheral = (
                config.peripheral.adapter ?? config.bluetooth.adapter, config.peripheral.advertising.enabled
            )
        }
        report.add(await bluez.run())
        report.add(
            await RadioDiagnosis(
                choice: config?.bluetooth.radio ?? .auto, adapters: config?.bluetooth.adapters ?? [adapter],
                scanMode: config?.bluetooth.scanMode ?? .active, endpoint: .current, timeout: limit, loop: loop
            ).run())
        if let config {
            report.add(await BrokerDiagnosis(config: config, timeout: limit, loop: loop).run())
            report.add(
                await ProxyDiagnosis(
                    settings: config.bluetoothProxy, stateDirectory: directory, timeout: limit, loop: loop
                ).run())
            report.add(WebDiagnosis.check(config.web))
        } else {
            report.add(.warn("broker", "not checked: the configuration is invalid"))
        }

        standardOutput(json ? report.json.serialized + "\n" : report.text)
        return report.exitCode
    }
}
