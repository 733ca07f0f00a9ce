import Foundation
import Glibc
import Subprocess
import TestSupport
import Testing

/// `gattway doctor` as a child process: against a private bus with `gattway simulate` and a real
/// mosquitto, and in each failure mode we can produce.
@Suite("gattway doctor")
struct DoctorTests {
    static let poweredScenario = """
        {"adapters": [{"name": "hci0", "address": "00:AA:01:00:00:00"}],
         "devices": [{"address": "A4:C1:38:00:00:01", "name": "Battery Sensor", "interval": "100ms", "service_uuids": ["180F"]}]}
        """
    static let poweredOffScenario = """
        {"adapters": [{"name": "hci0", "address": "00:AA:01:00:00:00", "powered": false}], "devices": []}
        """

    /// A private bus, optionally a simulator on it, and a directory for configs.
    struct World {
        let daemon: DBusDaemon
        let simulator: ChildProcess?
        let directory: URL
        let gattway: String
        /// The simulator's management socket (`gattway simulate --mgmt-socket`), handed to doctor
        /// as `GATTWAY_MGMT_SOCKET` (nil: doctor looks at the kernel's, which this host may lack).
        var managementSocket: String?

        /// Writes `config` (mode `mode`) and runs `gattway doctor --config it` plus `extra`.
        func doctor(config: String, mode: Int = 0o600, _ extra: [String] = []) async throws -> (
            status: Int32, output: String
        ) {
            let file = directory.appendingPathComponent("config-\(UUID().uuidString).json")
            try config.write(to: file, atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: file.path)
            var environment = daemon.environment
            if let managementSocket { environment["GATTWAY_MGMT_SOCKET"] = managementSocket }
            return try await ChildProcess.run(
                gattway, ["doctor", "--config", file.path, "--timeout", "5s"] + extra, environment: environment)
        }
    }

    static func withWorld(scenario: String?, extraBusConfig: String = "", _ body: (World) async throws -> Void)
        async throws
    {
        let gattway = try BuiltProduct.path("gattway")
        let daemon = try await DBusDaemon(extraConfig: extraBusConfig)
        defer { daemon.stop() }
        let directory = try TemporaryDirectory.make(prefix: "doctor")
        defer { try? FileManager.default.removeItem(at: directory) }
        var simulator: ChildProcess?
        var managementSocket: String?
        if let scenario {
            let file = directory.appendingPathComponent("scenario.json")
            try scenario.write(to: file, atomically: true, encoding: .utf8)
            let socket = directory.appendingPathComponent("mgmt").path
            let process = try ChildProcess(
                gattway, ["simulate", "--scenario", file.path, "--quiet", "--mgmt-socket", socket],
                environment: daemon.environment)
            try await process.waitForOutput(containing: "org.bluez is")
            simulator = process
            managementSocket = socket
        }
        defer { simulator?.stop() }
        try await body(
            World(
                daemon: daemon, simulator: simulator, directory: directory, gattway: gattway,
                managementSocket: managementSocket))
    }

    static func config(
        broker: String, username: String? = nil, password: String? = nil, stateDirectory: String? = nil,
        devices: String = "[]", web: String = #"{"enabled": false}"#
    ) -> String {
        var mqtt = #""server": "\#(broker)""#
        if let username { mqtt += #", "username": "\#(username)""# }
        if let password { mqtt += #", "password": "\#(password)""# }
        let state = stateDirectory.map { #", "state_directory": "\#($0)""# } ?? ""
        return
            #"{"mqtt": {\#(mqtt)}, "bluetooth": {"adapter": "hci0"}, "devices": \#(devices)\#(state), "web": \#(web)}"#
    }

    /// The line of the named check with the given status, e.g. `fail  adapter   …`.
    static func line(_ output: String, _ status: String, _ check: String) -> String? {
        output.split(separator: "\n").map(String.init).first {
            $0.hasPrefix(status.padding(toLength: 6, withPad: " ", startingAt: 0) + check + " ")
        }
    }

    static func passwordFile(in directory: URL, user: String, password: String) async throws -> String {
        let file = directory.appendingPathComponent("passwd").path
        let (status, output) = try await ChildProcess.run("mosquitto_passwd", ["-c", "-b", file, user, password])
        guard status == 0 else { throw ChildProcessError("mosquitto_passwd failed: \(output)") }
        return file
    }

    @Test("web: ok when something accepts connections on its address, a warning saying what to do when nothing does")
    func web() async throws {
        let broker = try await MosquittoBroker()
        try await Self.withWorld(scenario: Self.poweredScenario) { world in
            let (fd, port) = try LoopbackPort.bind()
            defer { close(fd) }
            #expect(listen(fd, 4) == 0)
            let listening = try await world.doctor(
                config: Self.config(broker: broker.url, web: #"{"listen": "127.0.0.1:\#(port)"}"#))
            #expect(
                Self.line(listening.output, "ok", "web")?.contains(
                    "http://127.0.0.1:\(port) accepts connections (no auth: this host only)") == true,
                "\(listening.output)")
            let free = try LoopbackPort.free()
            let nothing = try await world.doctor(
                config: Self.config(broker: broker.url, web: #"{"listen": "127.0.0.1:\#(free)"}"#))
            #expect(nothing.status == 0, "\(nothing.output)")
            #expect(
                Self.line(nothing.output, "warn", "web")?.contains(
                    "nothing accepts connections on http://127.0.0.1:\(free)")
                    == true, "\(nothing.output)")
        }
    }

    @Test("everything reachable: every check ok, exit 0; --json says the same")
    func allOK() async throws {
        let broker = try await MosquittoBroker()
        try await Self.withWorld(scenario: Self.poweredScenario) { world in
            let state = world.directory.appendingPathComponent("state").path
            let config = Self.config(broker: broker.url, stateDirectory: state)
            let result = try await world.doctor(config: config)
            #expect(result.status == 0, "\(result.output)")
            #expect(!result.output.contains("fail "), "\(result.output)")
            for check in ["config", "state", "bus", "bluez", "access", "adapter", "radio", "broker"] {
                #expect(Self.line(result.output, "ok", check) != nil, "no ok line for \(check):\n\(result.output)")
            }
            #expect(
                Self.line(result.output, "ok", "adapter")?.contains("hci0 (00:AA:01:00:00:00) is powered on") == true)
            #expect(Self.line(result.output, "ok", "bus")?.contains("DBUS_SYSTEM_BUS_ADDRESS") == true)
            #expect(Self.line(result.output, "ok", "broker")?.contains("connected to 127.0.0.1:\(broker.port)") == true)
            #expect(
                Self.line(result.output, "ok", "radio")?.contains(
                    "run reads the management socket at \(world.managementSocket ?? "?") (management interface 1.22, controllers hci0)"
                ) == true, "\(result.output)")

            let json = try await world.doctor(config: config, ["--json"])
            #expect(json.status == 0)
            let object = try JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [String: Any]
            #expect(object?["status"] as? String == "ok")
            #expect(object?["exit_code"] as? Int == 0)
            let checks = object?["checks"] as? [[String: Any]] ?? []
            #expect(checks.count == 8)
            #expect(checks.allSatisfy { $0["status"] as? String == "ok" })
        }
    }

    @Test(
        "radio: without a management socket auto warns that run reads D-Bus and how to get the other; mgmt fails, exit 1; dbus says so"
    )
    func radio() async throws {
        let broker = try await MosquittoBroker()
        try await Self.withWorld(scenario: Self.poweredScenario) { served in
            var world = served
            world.managementSocket = world.directory.appendingPathComponent("nobody-serves-this").path
            let auto = try await world.doctor(config: Self.config(broker: broker.url))
            #expect(auto.status == 0, "\(auto.output)")
            let warning = Self.line(auto.output, "warn", "radio")
            #expect(
                warning?.contains("run falls back to bluetoothd's D-Bus view, because cannot connect") == true,
                "\(auto.output)")
            #expect(warning?.contains("CAP_NET_ADMIN") == true, "\(auto.output)")
            let mgmtConfig =
                #"{"mqtt": {"server": "\#(broker.url)"}, "bluetooth": {"adapter": "hci0", "radio": "mgmt"}}"#
            let mgmt = try await world.doctor(config: mgmtConfig)
            #expect(mgmt.status == 1, "\(mgmt.output)")
            #expect(
                Self.line(mgmt.output, "fail", "radio")?.contains("bluetooth.radio is mgmt") == true, "\(mgmt.output)")
            let dbusConfig =
                #"{"mqtt": {"server": "\#(broker.url)"}, "bluetooth": {"adapter": "hci0", "radio": "dbus"}}"#
            let dbus = try await world.doctor(config: dbusConfig)
            #expect(dbus.status == 0, "\(dbus.output)")
            #expect(
                Self.line(dbus.output, "ok", "radio")?.contains("bluetooth.radio is dbus") == true, "\(dbus.output)")
        }
    }

    @Test(
        "radio lists each adapter of bluetooth.adapters with its path, scan mode and reports per second; one the kernel lacks is a warning"
    )
    func adapters() async throws {
        let broker = try await MosquittoBroker()
        try await Self.withWorld(scenario: Self.poweredScenario) { world in
            let one = try await world.doctor(config: Self.config(broker: broker.url))
            #expect(
                Self.line(one.output, "ok", "radio")?.contains("; adapters: hci0 (mgmt, scan mode active, ") == true,
                "\(one.output)")
            let two =
                #"{"mqtt": {"server": "\#(broker.url)"}, "bluetooth": {"adapters": ["hci0", "hci1"], "scan_mode": "passive"}}"#
            let result = try await world.doctor(config: two)
            let warning = Self.line(result.output, "warn", "radio")
            #expect(
                warning?.contains("hci0 (mgmt, scan mode passive, ") == true
                    && warning?.contains("hci1 (mgmt, scan mode passive, ") == true, "\(result.output)")
            #expect(warning?.contains("hci1 is not among them") == true, "\(result.output)")
            let dbus = try await world.doctor(
                config:
                    #"{"mqtt": {"server": "\#(broker.url)"}, "bluetooth": {"adapters": ["hci0", "hci1"], "radio": "dbus"}}"#
            )
            #expect(
                Self.line(dbus.output, "ok", "radio")?.contains(
                    "adapters: hci0 (dbus, scan mode active, reports/s in bridge/health), hci1 (dbus") == true,
                "\(dbus.output)")
        }
    }

    @Test("a --timeout past 365 days (1e300s) is a usage error naming the bound; 365 days itself runs the checks")
    func enormousTimeout() async throws {
        let broker = try await MosquittoBroker()
        try await Self.withWorld(scenario: Self.poweredScenario) { world in
            let file = world.directory.appendingPathComponent("config.json")
            let state = world.directory.appendingPathComponent("state").path
            try Self.config(broker: broker.url, stateDirectory: state).write(
                to: file, atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
            let refused = try await ChildProcess.run(
                world.gattway, ["doctor", "--config", file.path, "--timeout", "1e300s"],
                environment: world.daemon.environment)
            #expect(refused.status == 64, "\(refused.output)")
            #expect(refused.output.contains("at most 365 days"), "\(refused.output)")
            let longest = try await ChildProcess.run(
                world.gattway, ["doctor", "--config", file.path, "--timeout", "8760h"],
                environment: world.daemon.environment)
            #expect(longest.status == 0, "\(longest.output)")
            #expect(Self.line(longest.output, "ok", "broker") != nil, "\(longest.output)")
        }
    }

    @Test(
        "role peripheral: its adapter's GATT and advertising managers are checked; no free advertising instance fails")
    func peripheralRole() async throws {
        let broker = try await MosquittoBroker()
        let peripheral =
            #", "role": "peripheral", "peripheral": {"adapter": "hci1", "advertising": {"local_name": "gw"}}}"#
        let config = String(Self.config(broker: broker.url).dropLast()) + peripheral
        let twoAdapters = """
            {"adapters": [{"name": "hci0", "address": "00:AA:01:00:00:00"},
                          {"name": "hci1", "address": "00:AA:01:00:00:01", "advertising_instances": %d}], "devices": []}
            """
        try await Self.withWorld(scenario: String(format: twoAdapters, 5)) { world in
            let result = try await world.doctor(config: config)
            #expect(result.status == 0, "\(result.output)")
            #expect(
                Self.line(result.output, "ok", "peripheral")?.contains(
                    "hci1 can serve GATT applications and advertise (5 advertising instances free; legacy advertising only, 31 bytes)"
                ) == true,
                "\(result.output)")
            let other = try await world.doctor(
                config: config.replacingOccurrences(of: #""adapter": "hci1""#, with: #""adapter": "hci4""#))
            #expect(other.status == 1, "\(other.output)")
            #expect(
                Self.line(other.output, "fail", "peripheral")?.contains("no adapter hci4 for the peripheral role")
                    == true, "\(other.output)")
            let central = try await world.doctor(config: Self.config(broker: broker.url))
            #expect(
                Self.line(central.output, "ok", "peripheral") == nil, "role central does not check the peripheral side")
        }
        // A controller with extended advertising: doctor says how much an advertisement may hold.
        let extended = String(format: twoAdapters, 2).replacingOccurrences(
            of: #""advertising_instances": 2"#, with: #""advertising_instances": 2, "secondary_channels": ["1M", "2M"]"#
        )
        try await Self.withWorld(scenario: extended) { world in
            let result = try await world.doctor(config: config)
            #expect(
                Self.line(result.output, "ok", "peripheral")?.contains(
                    "(2 advertising instances free; extended advertising on 1M, 2M, up to 251 bytes)") == true,
                "\(result.output)")
        }
        try await Self.withWorld(scenario: String(format: twoAdapters, 0)) { world in
            let result = try await world.doctor(config: config)
            #expect(result.status == 1, "\(result.output)")
            #expect(
                Self.line(result.output, "fail", "peripheral")?.contains("hci1 has no free advertising instance")
                    == true, "\(result.output)")
        }
    }

    @Test("no org.bluez on the bus: fail with what to run, exit 1")
    func noBlueZ() async throws {
        let broker = try await MosquittoBroker()
        try await Self.withWorld(scenario: nil) { world in
            let result = try await world.doctor(config: Self.config(broker: broker.url))
            #expect(result.status == 1, "\(result.output)")
            let line = Self.line(result.output, "fail", "bluez")
            #expect(
                line?.contains(
                    "org.bluez is not on the system bus — is bluetoothd running? sudo systemctl start bluetooth")
                    == true, "\(result.output)")
            #expect(Self.line(result.output, "ok", "broker") != nil, "\(result.output)")
        }
    }

    @Test("adapter powered off: fail naming the adapter and bluetoothctl power on, exit 1")
    func poweredOff() async throws {
        let broker = try await MosquittoBroker()
        try await Self.withWorld(scenario: Self.poweredOffScenario) { world in
            let result = try await world.doctor(config: Self.config(broker: broker.url))
            #expect(result.status == 1, "\(result.output)")
            let line = Self.line(result.output, "fail", "adapter")
            #expect(line?.contains("hci0 (00:AA:01:00:00:00) is powered off") == true, "\(result.output)")
            #expect(line?.contains("bluetoothctl power on") == true, "\(result.output)")
            #expect(Self.line(result.output, "ok", "bluez") != nil)
        }
    }

    @Test("a configured adapter that does not exist: fail listing the adapters present")
    func unknownAdapter() async throws {
        let broker = try await MosquittoBroker()
        try await Self.withWorld(scenario: Self.poweredScenario) { world in
            let config = Self.config(broker: broker.url).replacingOccurrences(
                of: #""adapter": "hci0""#, with: #""adapter": "hci3""#)
            let result = try await world.doctor(config: config)
            #expect(result.status == 1, "\(result.output)")
            #expect(
                Self.line(result.output, "fail", "adapter")?.contains(#"no adapter matches "hci3"; present: hci0"#)
                    == true, "\(result.output)")
        }
    }

    @Test("the bus denies access to org.bluez: AccessDenied with the policy to install, exit 1")
    func accessDenied() async throws {
        let broker = try await MosquittoBroker()
        let deny = #"<policy context="default"><deny send_destination="org.bluez"/></policy>"#
        try await Self.withWorld(scenario: Self.poweredScenario, extraBusConfig: deny) { world in
            let result = try await world.doctor(config: Self.config(broker: broker.url))
            #expect(result.status == 1, "\(result.output)")
            let line = Self.line(result.output, "fail", "access")
            #expect(line?.contains("AccessDenied talking to org.bluez") == true, "\(result.output)")
            #expect(line?.contains("deploy/gattway-dbus.conf") == true, "\(result.output)")
        }
    }

    @Test("broker down: fail saying nothing listens there, exit 1")
    func brokerDown() async throws {
        let refusing = try RefusingPort()
        let port = refusing.port
        defer { withExtendedLifetime(refusing) {} }
        try await Self.withWorld(scenario: Self.poweredScenario) { world in
            let result = try await world.doctor(config: Self.config(broker: "mqtt://127.0.0.1:\(port)"))
            #expect(result.status == 1, "\(result.output)")
            #expect(
                Self.line(result.output, "fail", "broker")?.contains("nothing accepts connections at 127.0.0.1:\(port)")
                    == true,
                "\(result.output)")
            #expect(Self.line(result.output, "ok", "adapter") != nil, "\(result.output)")
        }
    }

    @Test("a wrong password is refused as not authorized; the right one connects; a world-readable password warns")
    func brokerCredentials() async throws {
        let directory = try TemporaryDirectory.make(prefix: "doctor-passwd")
        defer { try? FileManager.default.removeItem(at: directory) }
        let broker = try await MosquittoBroker(
            passwordFile: Self.passwordFile(in: directory, user: "gateway", password: "s3cret"))
        try await Self.withWorld(scenario: Self.poweredScenario) { world in
            let wrong = try await world.doctor(
                config: Self.config(broker: broker.url, username: "gateway", password: "wrong"))
            #expect(wrong.status == 1, "\(wrong.output)")
            let line = Self.line(wrong.output, "fail", "broker")
            #expect(
                line?.contains("broker 127.0.0.1:\(broker.port) refused the connection: not authorized") == true,
                "\(wrong.output)")
            #expect(line?.contains("check mqtt.username/password") == true, "\(wrong.output)")
            #expect(!wrong.output.contains("wrong"), "the password must not be printed:\n\(wrong.output)")

            let right = try await world.doctor(
                config: Self.config(broker: broker.url, username: "gateway", password: "s3cret"))
            #expect(right.status == 0, "\(right.output)")
            #expect(Self.line(right.output, "ok", "broker")?.contains("as gateway") == true, "\(right.output)")

            let readable = try await world.doctor(
                config: Self.config(broker: broker.url, username: "gateway", password: "s3cret"), mode: 0o644)
            #expect(readable.status == 0, "warnings do not fail:\n\(readable.output)")
            #expect(
                Self.line(readable.output, "warn", "config")?.contains("is world-readable and holds a password")
                    == true, "\(readable.output)")
        }
    }

    @Test(
        "secrets in other files: a world-readable password_file or TLS client key warns; a config that only names them does not"
    )
    func secretFiles() async throws {
        let broker = try await MosquittoBroker()
        try await Self.withWorld(scenario: Self.poweredScenario) { world in
            let passwordFile = world.directory.appendingPathComponent("password").path
            let certificate = world.directory.appendingPathComponent("client.crt").path
            let key = world.directory.appendingPathComponent("client.key").path
            for path in [passwordFile, certificate, key] {
                try "s3cret\n".write(toFile: path, atomically: true, encoding: .utf8)
            }
            let config =
                #"{"mqtt": {"server": "\#(broker.url)", "username": "gateway", "password_file": "\#(passwordFile)", "tls": {"cert_file": "\#(certificate)", "key_file": "\#(key)"}}, "devices": []}"#
            for path in [passwordFile, key] {
                try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: path)
            }
            let readable = try await world.doctor(config: config, mode: 0o644)
            #expect(
                readable.output.contains(
                    "\(passwordFile) is world-readable and holds the MQTT password (mqtt.password_file)"),
                "\(readable.output)")
            #expect(
                readable.output.contains("\(key) is world-readable and holds the TLS client key (mqtt.tls.key_file)"),
                "\(readable.output)")
            #expect(
                !readable.output.contains("holds a password or key"),
                "the config holds no secret itself:\n\(readable.output)")
            for path in [passwordFile, key] {
                try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
            }
            let closed = try await world.doctor(config: config, mode: 0o644)
            #expect(!closed.output.contains("world-readable"), "\(closed.output)")
        }
    }

    @Test("an invalid config: one fail line per problem with its JSON path, broker not checked, exit 78")
    func invalidConfig() async throws {
        let broker = try await MosquittoBroker()
        try await Self.withWorld(scenario: Self.poweredScenario) { world in
            let devices = #"[{"match": {"address": "AA:BB"}}]"#
            let result = try await world.doctor(config: Self.config(broker: broker.url, devices: devices))
            #expect(result.status == 78, "\(result.output)")
            #expect(
                Self.line(result.output, "fail", "config")?.contains("devices[0].match.address") == true,
                "\(result.output)")
            #expect(Self.line(result.output, "warn", "broker")?.contains("not checked") == true, "\(result.output)")
            // The Bluetooth checks still run (on the default adapter).
            #expect(Self.line(result.output, "ok", "adapter") != nil, "\(result.output)")

            let missing = try await ChildProcess.run(
                world.gattway, ["doctor", "--config", world.directory.appendingPathComponent("nope.json").path],
                environment: world.daemon.environment)
            #expect(missing.status == 78, "\(missing.output)")
            #expect(
                Self.line(missing.output, "fail", "config")?.contains("does not exist") == true, "\(missing.output)")
        }
    }

    @Test("a state directory that is a file: fail, exit 1")
    func stateDirectoryNotADirectory() async throws {
        let broker = try await MosquittoBroker()
        try await Self.withWorld(scenario: Self.poweredScenario) { world in
            let file = world.directory.appendingPathComponent("not-a-dir")
            try "x".write(to: file, atomically: true, encoding: .utf8)
            let result = try await world.doctor(config: Self.config(broker: broker.url), ["--state-dir", file.path])
            #expect(result.status == 1, "\(result.output)")
            #expect(
                Self.line(result.output, "fail", "state")?.contains("is not a directory") == true, "\(result.output)")
        }
    }

    @Test("a bindkeys.json in the state directory that others may read warns (exit 0); at 0600 it is not mentioned")
    func bindKeysReadable() async throws {
        let broker = try await MosquittoBroker()
        try await Self.withWorld(scenario: Self.poweredScenario) { world in
            let state = world.directory.appendingPathComponent("state-keys")
            try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
            let file = state.appendingPathComponent("bindkeys.json").path
            try #"{"bindkeys": {}}"#.write(toFile: file, atomically: false, encoding: .utf8)
            chmod(file, 0o644)
            let identities = state.appendingPathComponent("identities.json").path
            try #"{"identities": []}"#.write(toFile: identities, atomically: false, encoding: .utf8)
            chmod(identities, 0o640)
            let loose = try await world.doctor(config: Self.config(broker: broker.url), ["--state-dir", state.path])
            #expect(loose.status == 0, "warnings do not fail: \(loose.output)")
            for (name, holds) in [("bindkeys.json", "bind keys"), ("identities.json", "presence identities (IRKs)")] {
                #expect(
                    loose.output.split(separator: "\n").contains {
                        $0.hasPrefix("warn  state ") && $0.contains("\(name) is readable by others")
                            && $0.contains(holds)
                    }, "\(loose.output)")
            }
            chmod(file, 0o600)
            chmod(identities, 0o600)
            let tight = try await world.doctor(config: Self.config(broker: broker.url), ["--state-dir", state.path])
            #expect(!tight.output.contains("bindkeys.json"), "\(tight.output)")
            #expect(!tight.output.contains("identities.json"), "\(tight.output)")
        }
    }

    @Test(
        "a state directory with less free space than twice store_and_forward.max_bytes warns (exit 0), naming both; with max_bytes lowered it is ok",
        .enabled(if: ScratchFileSystem.runsTmpfsTests, Comment(rawValue: ScratchFileSystem.unavailable ?? "")))
    func stateDirectoryLowOnSpace() async throws {
        let broker = try await MosquittoBroker()
        let fs = try ScratchFileSystem(tmpfsBytes: 4 << 20)
        try await Self.withWorld(scenario: Self.poweredScenario) { world in
            let low = try await world.doctor(config: Self.config(broker: broker.url), ["--state-dir", fs.path])
            #expect(low.status == 0, "warnings do not fail: \(low.output)")
            let warning = Self.line(low.output, "warn", "state")
            #expect(
                warning?.contains("\(fs.path) has 4.0 MiB free, less than 32.0 MiB (twice store_and_forward.max_bytes")
                    == true, "\(low.output)")
            #expect(warning?.contains("lower store_and_forward.max_bytes") == true, "\(low.output)")
            let lowered =
                #"{"mqtt": {"server": "\#(broker.url)"}, "bluetooth": {"adapter": "hci0"}, "store_and_forward": {"max_bytes": 1048576}, "devices": []}"#
            let enough = try await world.doctor(config: lowered, ["--state-dir", fs.path])
            #expect(enough.status == 0, "\(enough.output)")
            #expect(
                Self.line(enough.output, "ok", "state")?.contains("\(fs.path) is writable, 4.0 MiB free") == true,
                "\(enough.output)")
        }
    }

    @Test(
        "a state directory on a read-only file system fails naming its mount point (exit 1); a full one fails too",
        .enabled(if: ScratchFileSystem.runsTmpfsTests, Comment(rawValue: ScratchFileSystem.unavailable ?? "")))
    func stateDirectoryReadOnlyOrFull() async throws {
        let broker = try await MosquittoBroker()
        let readOnly = try ScratchFileSystem(tmpfsBytes: 4 << 20, readOnly: true)
        let full = try ScratchFileSystem(tmpfsBytes: 64 << 10)
        try full.fill()
        try await Self.withWorld(scenario: Self.poweredScenario) { world in
            let result = try await world.doctor(
                config: Self.config(broker: broker.url), ["--state-dir", readOnly.path])
            #expect(result.status == 1, "\(result.output)")
            let line = Self.line(result.output, "fail", "state")
            #expect(
                line?.contains("\(readOnly.path) (--state-dir) is on a read-only file system") == true,
                "\(result.output)")
            #expect(line?.contains("mount -o remount,rw \(readOnly.path)") == true, "\(result.output)")
            let inside = try await world.doctor(
                config: Self.config(broker: broker.url), ["--state-dir", readOnly.path + "/gattway"])
            #expect(
                Self.line(inside.output, "fail", "state")?.contains("its parent is on a read-only file system") == true,
                "\(inside.output)")
            let filled = try await world.doctor(config: Self.config(broker: broker.url), ["--state-dir", full.path])
            #expect(filled.status == 1, "\(filled.output)")
            #expect(
                Self.line(filled.output, "fail", "state")?.contains("\(full.path) (--state-dir) is full") == true,
                "\(filled.output)")
        }
    }
}
