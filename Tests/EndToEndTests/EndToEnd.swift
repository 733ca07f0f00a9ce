import BlueZSimulator
import DBus
import EventLoop
import Foundation
import MQTT
import TestSupport

/// One end-to-end world with real parts: a private dbus-daemon, the BlueZ simulator on it (in
/// this process, so a test can read its recorded writes and drop links), a real mosquitto on a
/// free loopback port, `gattway run` as a child process with the test's config, and an MQTT
/// client that records everything under `#` from before the gateway starts.
///
/// ``run(config:scenario:_:)`` always stops everything it started, in reverse order, whether
/// the body returns or throws.
struct EndToEnd: Sendable {
    let daemon: DBusDaemon
    let loop: EventLoop
    let simulator: BlueZSimulator
    let broker: MosquittoBroker
    let observer: MQTTClient
    let messages: MessageRecorder
    let gateway: ChildProcess
    /// The config file the gateway runs with.
    let configPath: String
    /// The simulator's management protocol socket (`run(…, managementSocket: true)`), in the
    /// daemon's directory; `gattway run` has it as `GATTWAY_MGMT_SOCKET`.
    let managementSocket: String?

    /// The gateway's base topic in every test config.
    static let base = "gattway"

    /// Starts the world, runs `body`, stops the world.
    /// - Parameters:
    ///   - config: config.json text; `$SERVER` is replaced by the broker's URL.
    ///   - scenario: the simulator's world (default: the demo scenario, ten times faster).
    ///   - makeBroker: starts the broker (default: a plain non-persistent mosquitto).
    ///   - busConfig: more of the private dbus-daemon's configuration (a policy, an include).
    ///   - simulatorReady: runs with the simulator once it is up, before `gattway run` starts
    ///     (crash it, to start without bluetoothd).
    ///   - beforeGateway: runs once the simulator is up, before `gattway run` starts (another
    ///     BlueZ client's doings the gateway finds at start), with the bus address and the loop.
    ///   - environment: more environment variables for `gattway run` (as systemd sets them).
    ///   - managementSocket: the simulator also serves the kernel's management protocol, at
    ///     ``managementSocket`` (`mgmt` in the daemon's directory), given to `gattway run` as
    ///     `GATTWAY_MGMT_SOCKET`.
    static func run(
        config: String, scenario: Scenario? = nil,
        broker makeBroker: () async throws -> MosquittoBroker = { try await MosquittoBroker() },
        busConfig: String = "",
        simulatorReady: (BlueZSimulator) async throws -> Void = { _ in },
        beforeGateway: (String, EventLoop) async throws -> Void = { _, _ in },
        environment: [String: String] = [:],
        managementSocket: Bool = false,
        _ body: (EndToEnd) async throws -> Void
    ) async throws {
        let world = try scenario ?? Self.fastDemo()
        let daemon = try await DBusDaemon(extraConfig: busConfig)
        let loop = EventLoop(name: "e2e")
        let socketPath = managementSocket ? daemon.directory.appendingPathComponent("mgmt").path : nil
        var environment = environment
        if let socketPath { environment["GATTWAY_MGMT_SOCKET"] = socketPath }
        var simulator: BlueZSimulator?
        var broker: MosquittoBroker?
        var observer: MQTTClient?
        var gateway: ChildProcess?
        do {
            let bluez = try await BlueZSimulator.start(
                scenario: world, bus: .address(daemon.address), on: loop, managementSocket: socketPath)
            simulator = bluez
            try await simulatorReady(bluez)
            try await beforeGateway(daemon.address, loop)
            let started = try await makeBroker()
            broker = started
            let messages = MessageRecorder()
            let client = try MQTTClient(
                configuration: try MQTTConfiguration(
                    url: started.url, clientID: "e2e-observer-\(UUID().uuidString.prefix(8))"),
                loop: loop)
            observer = client
            try await client.connect()
            let subscription = try await client.subscribe(to: "#")
            let recording = Task { for await message in subscription { messages.record(message) } }
            defer { recording.cancel() }

            let configURL = daemon.directory.appendingPathComponent("config.json")
            try config.replacingOccurrences(of: "$SERVER", with: started.url)
                .write(to: configURL, atomically: true, encoding: .utf8)
            let process = try Self.launchGateway(configPath: configURL.path, daemon: daemon, environment: environment)
            gateway = process
            let world = EndToEnd(
                daemon: daemon, loop: loop, simulator: bluez, broker: started, observer: client,
                messages: messages, gateway: process, configPath: configURL.path, managementSocket: socketPath)
            do {
                try await messages.next(on: "\(base)/bridge/state", timeout: 60) { $0.text == #"{"state":"online"}"# }
                try await body(world)
            } catch {
                throw EndToEndFailure(error: error, gatewayLog: process.log())
            }
        } catch {
            await Self.stop(
                gateway: gateway, observer: observer, simulator: simulator, loop: loop, broker: broker, daemon: daemon)
            throw error
        }
        await Self.stop(
            gateway: gateway, observer: observer, simulator: simulator, loop: loop, broker: broker, daemon: daemon)
    }

    /// `gattway run` with the test's config and debug logging, on the private bus.
    private static func launchGateway(configPath: String, daemon: DBusDaemon, environment: [String: String] = [:])
        throws -> ChildProcess
    {
        try ChildProcess(
            try BuiltProduct.path("gattway"), ["run", "--config", configPath, "--log-level", "debug"],
            environment: daemon.environment.merging(environment) { $1 })
    }

    private static func stop(
        gateway: ChildProcess?, observer: MQTTClient?, simulator: BlueZSimulator?, loop: EventLoop,
        broker: MosquittoBroker?,
        daemon: DBusDaemon
    ) async {
        gateway?.stop(grace: 5)
        await observer?.disconnect()
        await simulator?.stop()
        loop.shutdown()
        broker?.stop()
        daemon.stop()
    }

    /// The built-in demo scenario (`gattway simulate --scenario demo`) ten times faster:
    /// advertising every 100 ms, notifications every 200 ms, BlueZ's own delays shortened.
    static func fastDemo(_ adjust: (inout Scenario) -> Void = { _ in }) throws -> Scenario {
        var scenario = try Scenario.parse(Data(DemoScenario.json.utf8))
        scenario.timing.disconnectDelay = 0.05
        scenario.timing.resolveDelay = 0.01
        scenario.timing.gattLatency = 0.002
        scenario.timing.temporaryTimeout = 10
        for index in scenario.devices.indices {
            scenario.devices[index].interval /= 10
            for service in scenario.devices[index].services.indices {
                for characteristic in scenario.devices[index].services[service].characteristics.indices {
                    if let every = scenario.devices[index].services[service].characteristics[characteristic]
                        .notifyInterval
                    {
                        scenario.devices[index].services[service].characteristics[characteristic].notifyInterval =
                            every / 10
                    }
                }
            }
        }
        adjust(&scenario)
        return scenario
    }

    // MARK: Helpers for tests

    /// The topic of a device (`gattway/<name>`) or one below it.
    static func topic(_ device: String, _ suffix: String? = nil) -> String {
        suffix.map { "\(base)/\(device)/\($0)" } ?? "\(base)/\(device)"
    }

    /// Starts another `gattway run` with the same config (after the first was killed, say);
    /// the caller stops it (it is also stopped when released).
    func startGateway() throws -> ChildProcess {
        try Self.launchGateway(configPath: configPath, daemon: daemon)
    }

    /// Publishes a command as a user would (QoS 1, not retained), optionally with an MQTT 5
    /// response topic and correlation data.
    func send(_ topic: String, _ payload: String, responseTopic: String? = nil, correlation: [UInt8]? = nil)
        async throws
    {
        var properties = MQTTProperties()
        properties.responseTopic = responseTopic
        properties.correlationData = correlation
        try await observer.publish(MQTTMessage(topic: topic, string: payload, properties: properties))
    }

    /// Subscribes a second, fresh client to `filter` and returns what the broker replays at
    /// once as retained (waits for `count` messages, then disconnects).
    func retained(_ filter: MQTTTopicFilter, count: Int) async throws -> [MQTTMessage] {
        let client = try MQTTClient(
            configuration: try MQTTConfiguration(url: broker.url, clientID: "e2e-late-\(UUID().uuidString.prefix(8))"),
            loop: loop)
        try await client.connect()
        let late = MessageRecorder()
        let subscription = try await client.subscribe(to: filter)
        let recording = Task { for await message in subscription { late.record(message) } }
        defer { recording.cancel() }
        do {
            let found = try await late.wait(for: "\(count) retained message(s) on \(filter)", count: count, timeout: 30)
            { _ in true }
            await client.disconnect()
            return found.map(\.message)
        } catch {
            await client.disconnect()
            throw error
        }
    }

    /// A BlueZ client of our own that scans without any filter, as another program on the
    /// host might: BlueZ then reports every device to every client, filtered or not.
    func startUnfilteredScan() async throws -> DBusConnection {
        let connection = try await DBusConnection.connect(to: .address(daemon.address), on: loop)
        _ = try await connection.call(
            destination: "org.bluez", path: "/org/bluez/hci0", interface: "org.bluez.Adapter1",
            method: "StartDiscovery",
            timeout: .seconds(30))
        return connection
    }
}

/// A failure inside an end-to-end test, with the gateway's log (its stderr) for diagnosis.
struct EndToEndFailure: Error, CustomStringConvertible {
    let error: any Error
    let gatewayLog: String
    var description: String {
        "\(error)\n--- gattway run log (last 60 lines) ---\n"
            + gatewayLog.split(separator: "\n").suffix(60).joined(separator: "\n")
    }
}
