import BlueZSimulator
import Bluetooth
import EventLoop
import JSON
import LocalSystem
import MQTT
import Subprocess

#if canImport(Glibc)
    import Glibc
#endif

/// Everything `gattway demo` starts — a private dbus-daemon, the BlueZ simulator with the demo
/// scenario (in this process), mosquitto on a free loopback port, `gattway run` as a child
/// process, and an MQTT client that prints what the gateway publishes — and stops again.
///
/// ``stop()`` may be called at any point (also while ``run(duration:)`` is still starting
/// things, e.g. on SIGINT) and stops exactly what was started, in reverse order.
actor DemoSession {
    /// Paths of the tools the demo needs.
    struct Tools: Sendable {
        var dbusDaemon: String
        var mosquitto: String
        var gattway: String
    }

    private let tools: Tools
    private let directory: String
    private let loop = EventLoop(name: "gattway-demo")
    private var children: [DemoChild] = []
    private var simulator: BlueZSimulator?
    private var client: MQTTClient?
    private var viewer: Task<Void, Never>?
    private var printer = DemoPrinter(base: DemoConfig.base)
    /// Messages on the lamp's topics and the bridge state, for the round trip to wait on.
    private var inbox: [MQTTMessage] = []
    private var stopped = false

    init(tools: Tools) throws {
        self.tools = tools
        let suffix = String(UInt64.random(in: 0...UInt64.max), radix: 16)
        let path = LocalFile.temporaryDirectory + "/gattway-demo-\(getpid())-\(suffix.suffix(8))"
        do {
            try LocalFile.createDirectories(path, mode: 0o700)
            guard chmod(path, 0o700) == 0 else {
                throw CLIError.failure("chmod 0700 \(path): \(String(cString: strerror(errno)))")
            }
        } catch {
            throw CLIError.failure("cannot create a temporary directory \(path): \(error)")
        }
        directory = path
    }

    /// The simulator's management socket (the kernel's protocol), which `gattway run`'s
    /// `bluetooth.radio` `auto` reads (`GATTWAY_MGMT_SOCKET`).
    nonisolated var managementSocket: String { directory + "/mgmt" }

    /// The directory holding the generated configs, the bus socket and the logs.
    nonisolated var logDirectory: String { directory }

    /// Starts everything, performs the command round trip, then waits `duration` seconds (or
    /// until cancelled when nil). Throws with the relevant log when a part does not come up.
    func run(duration: Double?) async throws {
        let started = ContinuousClock.now
        let busAddress = try await startBus()
        let port: UInt16
        do {
            port = try LoopbackPort.free()
        } catch {
            throw CLIError.failure("\(error)")
        }
        try await startBroker(port: port)
        let simulator = try await BlueZSimulator.start(
            scenario: try Scenario.parse(DemoScenario.json.utf8), bus: .address(busAddress), on: loop,
            managementSocket: managementSocket)
        self.simulator = simulator
        say("simulator: the demo scenario owns org.bluez on the private bus (\(busAddress))")
        say(
            "simulator: its controllers' management socket, which the gateway reads every report from: \(managementSocket)"
        )
        try await startViewer(port: port)
        let webPort: UInt16
        do {
            webPort = try LoopbackPort.free()
        } catch {
            throw CLIError.failure("\(error)")
        }
        // A token of 16 random bytes: the page asks for it (and so shows how logging in looks).
        let webToken = Hex.encode((0..<16).map { _ in UInt8.random(in: 0...255) })
        let gateway = try startGateway(
            busAddress: busAddress, brokerURL: "mqtt://127.0.0.1:\(port)", webPort: webPort, webToken: webToken)
        try await waitFor("the gateway's bridge/state online", timeout: 20, child: gateway) { message in
            message.topic == "\(DemoConfig.base)/bridge/state" && message.payloadString == #"{"state":"online"}"#
        }
        say("gateway: gattway run (pid \(gateway.pid)) is online; watch it yourself with")
        say("  mosquitto_sub -h 127.0.0.1 -p \(port) -t '\(DemoConfig.base)/#' -v")
        say("page: http://127.0.0.1:\(webPort)/ (log in with the token \(webToken))")
        say("readings (device, attribute value unit):")
        try await roundTrip(gateway: gateway)
        if let duration {
            let left = started + .nanoseconds(Int64(saturating: duration * 1e9)) - ContinuousClock.now
            if left > .zero { try await Task.sleep(for: left) }
        } else {
            while true { try await Task.sleep(nanoseconds: 3_600_000_000_000) }
        }
    }

    /// Stops the gateway (it publishes its offline state), the viewer, the simulator, mosquitto
    /// and dbus-daemon; removes the temporary directory unless `keepFiles`. Safe to call twice.
    func stop(keepFiles: Bool) async {
        guard !stopped else { return }
        stopped = true
        if let gateway = children.first(where: { $0.name == "gattway run" }) { await gateway.stop(grace: 10) }
        viewer?.cancel()
        await client?.disconnect()
        await simulator?.stop()
        loop.shutdown()
        for child in children.reversed() { await child.stop() }
        let survivors = children.filter(\.isRunning).map { "\($0.name) (pid \($0.pid))" }
        if !survivors.isEmpty {
            standardError("gattway demo: still running after stop: \(survivors.joined(separator: ", "))\n")
        }
        if keepFiles {
            standardError("gattway demo: configs and logs kept in \(directory)\n")
        } else {
            LocalFile.removeTree(directory)
        }
    }

    // MARK: Parts

    private func startBus() async throws -> String {
        let socket = directory + "/bus"
        let config = PrivateBusConfiguration.xml(socketPath: socket)
        let configPath = directory + "/bus.conf"
        try LocalFile.write(config, to: configPath)
        let daemon = try spawn(
            "dbus-daemon", tools.dbusDaemon,
            ["--config-file=\(configPath)", "--nofork", "--print-address", "--nopidfile"])
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if let line = daemon.log().split(separator: "\n").first(where: { $0.hasPrefix("unix:") }) {
                say("dbus-daemon: a private bus (pid \(daemon.pid)) stands in for the system bus")
                return String(line)
            }
            guard daemon.isRunning else { break }
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        throw CLIError.failure("dbus-daemon did not start:\n\(daemon.logTail())")
    }

    private func startBroker(port: UInt16) async throws {
        var lines = [
            "listener \(port) 127.0.0.1",
            "allow_anonymous true",
            "persistence false",
            "max_queued_messages 0",
            "log_dest stdout",
        ]
        // As root, mosquitto would switch to the user "mosquitto", which cannot read our files.
        if getuid() == 0, let entry = getpwuid(getuid()) {
            lines.insert("user \(String(cString: entry.pointee.pw_name))", at: 0)
        }
        let configPath = directory + "/mosquitto.conf"
        try LocalFile.write(lines.joined(separator: "\n") + "\n", to: configPath)
        let broker = try spawn("mosquitto", tools.mosquitto, ["-c", configPath])
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if LoopbackPort.accepts(port) {
                say("mosquitto: a local broker (pid \(broker.pid)) on 127.0.0.1:\(port)")
                return
            }
            guard broker.isRunning else { break }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        throw CLIError.failure("mosquitto did not listen on 127.0.0.1:\(port):\n\(broker.logTail())")
    }

    private func startViewer(port: UInt16) async throws {
        let client = try MQTTClient(
            configuration: try MQTTConfiguration(
                url: "mqtt://127.0.0.1:\(port)", clientID: "gattway-demo-viewer-\(getpid())"),
            loop: loop)
        self.client = client
        try await client.connect()
        let subscription = try await client.subscribe(to: "#")
        viewer = Task { [weak self] in
            for await message in subscription { await self?.received(message) }
        }
    }

    private func startGateway(busAddress: String, brokerURL: String, webPort: UInt16, webToken: String) throws
        -> DemoChild
    {
        let configPath = directory + "/config.json"
        // Only for this user: it holds the page's token.
        try LocalFile.write(
            DemoConfig.text(brokerURL: brokerURL, webPort: webPort, webToken: webToken), to: configPath, mode: 0o600)
        var environment = LocalEnvironment.all
        environment["DBUS_SYSTEM_BUS_ADDRESS"] = busAddress
        environment["GATTWAY_MGMT_SOCKET"] = managementSocket
        return try spawn(
            "gattway run", tools.gattway, ["run", "--config", configPath, "--log-level", "notice"],
            environment: environment)
    }

    /// Lamp on → the write the simulator recorded → the lamp's state read back from `ff02`.
    private func roundTrip(gateway: DemoChild) async throws {
        let lamp = "\(DemoConfig.base)/\(DemoConfig.lamp)"
        try await waitFor("\(DemoConfig.lamp) to connect", timeout: 30, child: gateway) {
            $0.topic == lamp + "/availability" && $0.payloadString == #"{"state":"online"}"#
        }
        let sent = ContinuousClock.now
        let mark = inbox.count
        say("command: \(lamp)/set {\"light\": \"ON\", \"transaction\": \"demo-1\"}")
        try await publish(lamp + "/set", #"{"light": "ON", "transaction": "demo-1"}"#)
        let response = try await waitFor("the response to demo-1", timeout: 20, after: mark, child: gateway) {
            $0.topic == lamp + "/response" && (try? JSONValue.parse($0.payload))?["transaction"] == .string("demo-1")
        }
        let reply = try? JSONValue.parse(response.payload)
        guard reply?["status"] == .string("ok") else {
            throw CLIError.failure("command round trip failed: \(response.payloadString)")
        }
        say("response: \(response.payloadString) after \(Int((ContinuousClock.now - sent) / .milliseconds(1))) ms")
        let writes =
            await simulator?.recordedWrites.filter {
                $0.device.description == DemoConfig.lampAddress && $0.uuid.shortDescription == "FF01"
            } ?? []
        guard let write = writes.last, write.value == [0x01] else {
            throw CLIError.failure(
                "command round trip failed: the simulator recorded no write of 01 to ff01 (\(writes.count) writes)")
        }
        say("simulator: the lamp received a write of 01 to ff01 (\(write.type))")
        let readMark = inbox.count
        try await publish(lamp + "/get", #"{"light": "", "transaction": "demo-2"}"#)
        try await waitFor("the lamp's state read back", timeout: 20, after: readMark, child: gateway) {
            $0.topic == lamp && (try? JSONValue.parse($0.payload))?["light"] == .number(1)
        }
        say("command round trip OK: light ON → ff01 = 01 written → ff02 read back, \(DemoConfig.lamp) shows light 1")
    }

    // MARK: Helpers

    private func received(_ message: MQTTMessage) {
        if message.topic.hasPrefix("homeassistant/") {
            printer.discovery(message.payload)
            return
        }
        if let line = printer.line(topic: message.topic, payload: message.payload) { standardOutput(line + "\n") }
        inbox.append(message)
        if inbox.count > 10_000 { inbox.removeFirst(5_000) }
    }

    private func publish(_ topic: String, _ payload: String) async throws {
        guard let client else { throw CLIError.failure("the demo's MQTT client is not connected") }
        try await client.publish(MQTTMessage(topic: topic, string: payload))
    }

    /// Waits for a message (received at or after `after`) matching `predicate`; throws with the
    /// gateway's log when it does not come within `timeout` seconds or the gateway exits.
    @discardableResult
    private func waitFor(
        _ what: String, timeout: Double, after start: Int = 0, child: DemoChild, _ predicate: (MQTTMessage) -> Bool
    ) async throws -> MQTTMessage {
        let deadline = ContinuousClock.now + .seconds(timeout)
        var start = min(start, inbox.count)
        while true {
            if let found = inbox[start...].first(where: predicate) { return found }
            start = inbox.count
            guard child.isRunning else {
                throw CLIError.failure(
                    "\(child.name) exited (status \(child.exitStatus ?? -1)) while waiting for \(what):\n\(child.logTail())"
                )
            }
            guard ContinuousClock.now < deadline else {
                throw CLIError.failure("no \(what) within \(Int(timeout)) s; \(child.name) log:\n\(child.logTail())")
            }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
    }

    private func spawn(_ name: String, _ path: String, _ arguments: [String], environment: [String: String]? = nil)
        throws -> DemoChild
    {
        let logName = name.replacing(" ", with: "-")
        let child = try DemoChild(
            name: name, path: path, arguments: arguments, environment: environment,
            logPath: directory + "/\(logName).log")
        children.append(child)
        return child
    }

    private func say(_ text: String) {
        standardOutput("\(DemoPrinter.time())  \(text)\n")
    }
}
