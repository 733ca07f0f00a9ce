import BlueZSimulator
import DBus
import EventLoop

/// `gattway simulate`: runs the BlueZ simulator (a virtual bluetoothd owning `org.bluez`) on a
/// bus until SIGINT or SIGTERM.
struct SimulateCommand: Command {
    static let name = "simulate"
    static let summary = "Run the BlueZ simulator (a virtual bluetoothd) from a scenario."
    static let discussion = """
        Owns org.bluez on the system bus ($DBUS_SYSTEM_BUS_ADDRESS, normally a private dbus-daemon) or on
        --bus-address, and behaves towards central clients as BlueZ 5.66 does. The scenario is a JSON file
        (docs/simulator.md) or "demo" for the built-in demo world. The control interface
        io.gattway.Simulator1 lives at /io/gattway/Simulator. With --mgmt-socket it also serves the kernel's
        Bluetooth management protocol for its adapters (what gattway run reads at $GATTWAY_MGMT_SOCKET).
        Stops on SIGINT or SIGTERM.
        """
    static let options: [Option] = [
        .value("scenario", "FILE", "Scenario file, or \"demo\".", default: "demo"),
        .value("bus-address", "ADDR", "D-Bus address to use instead of the system bus."),
        .value(
            "mgmt-socket", "PATH",
            "Serve the kernel's Bluetooth management protocol on a Unix SOCK_SEQPACKET socket at PATH."),
        .flag("print-demo", "Print the demo scenario JSON and exit."),
        .flag("quiet", "Do not log simulator events to stderr."),
    ]

    let scenario: String
    let busAddress: String?
    let managementSocket: String?
    let printDemo: Bool
    let quiet: Bool

    init(parsing arguments: ParsedArguments) throws {
        scenario = arguments.value("scenario") ?? "demo"
        busAddress = arguments.value("bus-address")
        managementSocket = arguments.value("mgmt-socket")
        printDemo = arguments.flag("print-demo")
        quiet = arguments.flag("quiet")
    }

    func run() async throws -> ExitCode {
        if printDemo {
            standardOutput(DemoScenario.json + "\n")
            return .success
        }
        let world: Scenario
        do {
            world =
                scenario == "demo"
                ? try Scenario.parse(DemoScenario.json.utf8)
                : try Scenario.load(path: scenario)
        } catch {
            throw CLIError.config("\(scenario): \(error)")
        }
        let bus: DBusConnection.Bus = busAddress.map { .address($0) } ?? .system
        let loop = EventLoop(name: "gattway-simulate")
        let quiet = self.quiet
        let printer: @Sendable (String) -> Void = { line in writeToStandardError(line + "\n") }
        let simulator: BlueZSimulator
        do {
            simulator = try await BlueZSimulator.start(
                scenario: world, bus: bus, on: loop, log: quiet ? nil : printer, managementSocket: managementSocket)
        } catch {
            throw CLIError.failure(
                "cannot start the simulator on \((try? bus.resolvedAddress()) ?? "the bus"): \(error)")
        }
        standardOutput(
            "gattway simulate: org.bluez is \(await simulator.uniqueName ?? "?") on \((try? bus.resolvedAddress()) ?? "?"); "
                + "\(world.adapters.count) adapter(s), \(world.devices.count) device(s); "
                + "control: \(BlueZSimulator.controlInterface) at \(BlueZSimulator.controlPath)"
                + (managementSocket.map { "; management socket: \($0)" } ?? "") + "\n")
        let received = await SignalSources.waitForTermination()
        if !quiet { writeToStandardError("gattway simulate: \(received), stopping\n") }
        await simulator.stop()
        loop.shutdown()
        return .success
    }
}
