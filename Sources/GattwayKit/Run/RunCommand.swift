import Gateway
import GatewayRuntime
import LocalSystem

/// `gattway run`: the command line of the gateway process (``GatewayProcess``, in the
/// GatewayRuntime library, is the process itself: its services, their start and their stop).
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
            "Where the offline queue, the bind keys set at run time and central.json are kept across restarts (overrides state_directory). central.json names the devices of connect: true rules the gateway had links to (subscribed, polled or commanded): after a crash, kill or power cut every one it had or was making; after a clean stop (SIGTERM, a reboot) those up at the stop. The next start reconnects those a rule still connects, without waiting for an advertisement.",
            default: "config's state_directory, else memory only"),
    ]

    let options: GatewayProcess.Options

    init(parsing arguments: ParsedArguments) throws {
        let configPath = arguments.configPath
        let levelName = arguments.value("log-level") ?? "info"
        guard let level = GatewayLogger.Level(name: levelName) else {
            throw CLIError.usage(
                "--log-level: \"\(levelName)\" is not a level (expected error, warning, notice, info or debug)")
        }
        options = GatewayProcess.Options(
            configPath: configPath, level: level, stateDirectory: arguments.value("state-dir"))
    }

    func run() async throws -> ExitCode {
        await GatewayProcess(options, errorOutput: { standardError($0) }).run()
    }
}
