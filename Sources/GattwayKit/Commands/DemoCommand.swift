import LocalSystem

/// `gattway demo`: the whole product on one machine without Bluetooth hardware — a private
/// dbus-daemon, the BlueZ simulator with the demo scenario, mosquitto on a free loopback port
/// and `gattway run`, printing the readings the gateway publishes and a command round trip.
struct DemoCommand: Command {
    static let name = "demo"
    static let summary = "Show the gateway end to end: simulated devices, a local broker, readings and a command."
    static let discussion = """
        Starts a private dbus-daemon, the BlueZ simulator with the built-in demo scenario (gattway simulate \
        --print-demo), mosquitto on a free port of 127.0.0.1 and the gateway (gattway run) with a demo \
        config; prints each device's decoded readings (attribute, value, unit) as they arrive over MQTT; \
        switches the simulated lamp on and checks the write and the state read back. Runs until Ctrl-C \
        (SIGINT), SIGTERM or --duration, then stops everything it started. Needs dbus-daemon and \
        mosquitto (Debian: apt-get install dbus-daemon mosquitto, or make deps); no Bluetooth adapter, \
        no root.
        """
    static let options: [Option] = [
        .value("duration", "DURATION", "Stop after this long (e.g. 20s).", default: "until SIGINT"),
        .value(
            "print-config", "BROKER_URL", "Print the gateway configuration the demo uses, for that broker, and exit."),
    ]

    let duration: Double?
    let printConfigBroker: String?

    init(parsing arguments: ParsedArguments) throws {
        duration = try arguments.duration("duration")
        printConfigBroker = arguments.value("print-config")
    }

    func run() async throws -> ExitCode {
        if let broker = printConfigBroker {
            standardOutput(DemoConfig.text(brokerURL: broker) + "\n")
            return .success
        }
        guard let mosquitto = DemoChild.find("mosquitto") else {
            throw CLIError.failure(
                "gattway demo needs mosquitto, which is not installed (looked on PATH and in /usr/sbin); "
                    + "install it with: sudo apt-get install mosquitto   (or: make deps)")
        }
        guard let dbusDaemon = DemoChild.find("dbus-daemon") else {
            throw CLIError.failure(
                "gattway demo needs dbus-daemon, which is not installed; install it with: sudo apt-get install dbus-daemon   (or: make deps)"
            )
        }
        let session = try DemoSession(
            tools: .init(dbusDaemon: dbusDaemon, mosquitto: mosquitto, gattway: Self.ownExecutable()))
        // The first of: the demo ran its course (or failed), SIGINT/SIGTERM.
        let (outcomes, continuation) = AsyncStream.makeStream(of: Result<String?, any Error>.self)
        let work = Task {
            do {
                try await session.run(duration: duration)
                continuation.yield(.success(nil))
            } catch {
                continuation.yield(.failure(error))
            }
        }
        let signals = Task {
            continuation.yield(.success(await SignalSources.waitForTermination()))
        }
        var outcome: Result<String?, any Error> = .success(nil)
        for await first in outcomes {
            outcome = first
            break
        }
        work.cancel()
        _ = await work.result
        _ = signals
        switch outcome {
        case .success(let signal):
            if let signal { standardOutput("\(DemoPrinter.time())  \(signal): stopping\n") }
            await session.stop(keepFiles: false)
            standardOutput("\(DemoPrinter.time())  demo stopped; every process it started has ended\n")
            return .success
        case .failure(let error):
            await session.stop(keepFiles: true)
            if error is CancellationError { return .failure }
            throw error
        }
    }

    /// This executable (the gateway runs as `gattway run` from the same build).
    static func ownExecutable() -> String {
        LocalFile.symbolicLinkDestination("/proc/self/exe") ?? CommandLine.arguments[0]
    }
}
