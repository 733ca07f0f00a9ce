import Foundation
import TestSupport
import Testing

/// `gattway advertise` and `gattway serve`: what they refuse before touching the bus.
@Suite("gattway peripheral commands")
struct PeripheralCommandTests {
    let gattway: String

    init() throws {
        gattway = try BuiltProduct.path("gattway")
    }

    @Test("advertise refuses an advertisement over 31 bytes with exit 64, naming the size and the fields")
    func advertiseTooLarge() async throws {
        let result = try await ChildProcess.run(
            gattway, ["advertise", "--name", "Kitchen sensor", "--service", "6e400001-b5a3-f393-e0a9-e50e24dcca9e"])
        #expect(result.status == 64)
        #expect(result.output.contains("advertisement needs 37 bytes, legacy limit is 31"), "\(result.output)")
        #expect(result.output.contains("local name \"Kitchen sensor\" 16"))
        #expect(result.output.contains("shorten the local name by 6 bytes"))
    }

    @Test("advertise counts solicited UUIDs (--solicit) in the 31 bytes and refuses a bad one with exit 64")
    func advertiseSolicit() async throws {
        let result = try await ChildProcess.run(
            gattway,
            [
                "advertise", "--name", "gw", "--solicit", "1805,6e400001-b5a3-f393-e0a9-e50e24dcca9e", "--service",
                "180F",
            ])
        #expect(result.status == 64)
        #expect(
            result.output.contains("16-bit solicited UUIDs (1) 4, 128-bit solicited UUIDs (1) 18"), "\(result.output)")
        let bad = try await ChildProcess.run(gattway, ["advertise", "--solicit", "nope"])
        #expect(bad.status == 64)
        #expect(bad.output.contains("--solicit: \"nope\" is not a UUID"), "\(bad.output)")
    }

    @Test("advertise refuses malformed data options with exit 64")
    func advertiseBadOptions() async throws {
        let data = try await ChildProcess.run(gattway, ["advertise", "--service-data", "180F:64"])
        #expect(data.status == 64)
        #expect(data.output.contains("--service-data: expected KEY=HEX"))
        let company = try await ChildProcess.run(gattway, ["advertise", "--manufacturer-data", "0x1ffff=01"])
        #expect(company.status == 64)
        #expect(company.output.contains("is not a company id"))
    }

    @Test("serve names the JSON path of a bad tree and exits 64")
    func serveBadTree() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "gattway-serve-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let cases: [(String, String)] = [
            (
                #"{"services": [{"uuid": "180F", "characteristics": [{"uuid": "2A19", "properties": ["read", "nottify"]}]}]}"#,
                #"services[0].characteristics[0].properties: "nottify" is not a BlueZ flag"#
            ),
            (
                #"{"services": [{"uuid": "180F", "characteristics": [{"uuid": "2A19", "properties": ["read"], "value": 300, "encoding": "u8"}]}]}"#,
                "services[0].characteristics[0].value: 300 is out of range for u8"
            ),
            (
                #"{"services": [{"uuid": "1800", "characteristics": [{"uuid": "2A00", "properties": ["read"]}]}]}"#,
                "services[0]: service 1800 is reserved"
            ),
            (#"{"services": [{"uuid": "180F", "characteristcs": []}]}"#, "services[0].characteristics: is required"),
        ]
        for (index, (tree, message)) in cases.enumerated() {
            let file = directory.appendingPathComponent("tree\(index).json")
            try tree.write(to: file, atomically: true, encoding: .utf8)
            let result = try await ChildProcess.run(gattway, ["serve", "--tree", file.path])
            #expect(result.status == 64, "\(tree)")
            #expect(result.output.contains(message), "\(result.output)")
        }
        let missing = try await ChildProcess.run(gattway, ["serve"])
        #expect(missing.status == 64)
        #expect(missing.output.contains("--tree FILE is required"))
    }

    // MARK: Against the simulator (hci1 serves, hci0 is the central)

    static let scenario = """
        {
          "timing": {"disconnect_delay": "50ms", "temporary_timeout": "5s", "resolve_delay": "10ms", "gatt_latency": 0},
          "adapters": [{"name": "hci0", "address": "00:AA:01:00:00:00"}, {"name": "hci1", "address": "00:AA:02:00:00:00"}],
          "links": [{"adapters": ["hci0", "hci1"], "interval": "20ms"}],
          "devices": []
        }
        """

    static let tree = """
        {"name": "gw-serve", "services": [
          {"uuid": "180F", "characteristics": [
            {"uuid": "2A19", "properties": ["read", "notify"], "value": 94, "encoding": "u8",
             "descriptors": [{"uuid": "2901", "value": "Level"}]},
            {"uuid": "FF01", "properties": ["read", "write", "write-without-response", "notify"], "value": "00", "encoding": "hex"},
            {"uuid": "FF03", "properties": ["read"], "read_error": 128}]}]}
        """

    /// A private bus with `gattway simulate` on it, the tree in a file, and a function running
    /// gattway there (with the simulator, whose log shows what it registered unless `quiet`).
    static func withSimulator(
        quiet: Bool = true,
        _ body: (_ directory: URL, _ environment: [String: String], _ gattway: String, _ simulator: ChildProcess)
            async throws -> Void
    ) async throws {
        let gattway = try BuiltProduct.path("gattway")
        let daemon = try await DBusDaemon()
        defer { daemon.stop() }
        let scenarioFile = daemon.directory.appendingPathComponent("scenario.json")
        try scenario.write(to: scenarioFile, atomically: true, encoding: .utf8)
        try tree.write(to: daemon.directory.appendingPathComponent("tree.json"), atomically: true, encoding: .utf8)
        let simulator = try ChildProcess(
            gattway, ["simulate", "--scenario", scenarioFile.path] + (quiet ? ["--quiet"] : []),
            environment: daemon.environment)
        defer { simulator.stop() }
        try await simulator.waitForOutput(containing: "org.bluez is")
        try await body(daemon.directory, daemon.environment, gattway, simulator)
    }

    @Test("serve: a central on hci0 reads, writes, gets an app error and notifications; serve prints each")
    func serve() async throws {
        try await Self.withSimulator { directory, environment, gattway, _ in
            let tree = directory.appendingPathComponent("tree.json").path
            let server = try ChildProcess(
                gattway, ["serve", "--tree", tree, "--adapter", "hci1", "--json"], environment: environment)
            defer { server.stop() }
            try await server.waitForOutput(containing: #""event":"serving""#)
            let central = ["--adapter", "hci0", "--timeout", "10s"]
            let read = try await ChildProcess.run(
                gattway, ["read", "00:AA:02:00:00:00", "2A19", "--json"] + central, environment: environment)
            #expect(read.status == 0, "\(read.output)")
            #expect(read.output.contains(#""hex":"5e""#))
            try await server.waitForOutput(
                containing: #""event":"read","characteristic":"2A19","central":"00:AA:01:00:00:00""#)
            let write = try await ChildProcess.run(
                gattway, ["write", "00:AA:02:00:00:00", "180F/FF01", "0a0b"] + central, environment: environment)
            #expect(write.status == 0, "\(write.output)")
            try await server.waitForOutput(
                containing: #""event":"write","characteristic":"FF01","central":"00:AA:01:00:00:00""#)
            let back = try await ChildProcess.run(
                gattway, ["read", "00:AA:02:00:00:00", "FF01", "--json"] + central, environment: environment)
            #expect(back.output.contains(#""hex":"0a0b""#), "\(back.output)")
            let refused = try await ChildProcess.run(
                gattway, ["read", "00:AA:02:00:00:00", "FF03"] + central, environment: environment)
            #expect(refused.status == 1)
            #expect(refused.output.contains("0x80"), "\(refused.output)")
            try await server.waitForOutput(containing: #""error":128"#)
            let notify = try await ChildProcess.run(
                gattway, ["notify", "00:AA:02:00:00:00", "FF01", "--duration", "1s"] + central, environment: environment
            )
            #expect(notify.status == 0, "\(notify.output)")
            try await server.waitForOutput(containing: #""event":"subscribed","characteristic":"FF01""#)
            try await server.waitForOutput(containing: #""event":"unsubscribed","characteristic":"FF01""#)
        }
    }

    @Test("advertise: a scan on hci0 sees the name, the service UUID and the data until the advertiser stops")
    func advertise() async throws {
        try await Self.withSimulator { _, environment, gattway, _ in
            let advertiser = try ChildProcess(
                gattway,
                [
                    "advertise", "--adapter", "hci1", "--name", "gw-adv", "--service", "181A", "--service-data",
                    "181A=0102",
                    "--manufacturer-data", "0xffff=0a0b",
                ],
                environment: environment)
            defer { advertiser.stop() }
            try await advertiser.waitForOutput(containing: "advertising as 00:AA:02:00:00:00")
            let scan = try await ChildProcess.run(
                gattway, ["scan", "--adapter", "hci0", "--services", "181A", "--duration", "5s", "--json"],
                environment: environment)
            #expect(scan.status == 0, "\(scan.output)")
            let line = try #require(
                scan.output.split(separator: "\n").first { $0.contains("00:AA:02:00:00:00") }, "\(scan.output)")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            #expect(object["name"] as? String == "gw-adv")
            #expect((object["services"] as? [String])?.contains { $0.uppercased().contains("181A") } == true, "\(line)")
            #expect("\(object["service_data"] ?? "")".contains("0102"), "\(line)")
            #expect("\(object["manufacturer_data"] ?? "")".contains("0a0b"), "\(line)")
            advertiser.signal(SIGINT)
            #expect(try await within(30, "gattway advertise to exit on SIGINT") { try await advertiser.exited() } == 0)
        }
    }

    @Test(
        "advertise --solicit: bluetoothd (the simulator) registers the solicited UUIDs, 16- and 128-bit, and a scan on hci0 sees the advertisement"
    )
    func advertiseSolicitRegistered() async throws {
        try await Self.withSimulator(quiet: false) { _, environment, gattway, simulator in
            let custom = "6e400001-b5a3-f393-e0a9-e50e24dcca9e"
            // Flags 3 + 16-bit solicited 4 + 128-bit solicited 18 + name 4 = 29 of 31 bytes.
            let advertiser = try ChildProcess(
                gattway, ["advertise", "--adapter", "hci1", "--name", "gw", "--solicit", "1805,\(custom)"],
                environment: environment)
            defer { advertiser.stop() }
            try await advertiser.waitForOutput(containing: "advertising as 00:AA:02:00:00:00")
            // What bluetoothd read from the advertisement (a scanning adapter does not show
            // solicited UUIDs in Device1).
            try await simulator.waitForOutput(containing: "hci1 advertises")
            let registered = try #require(
                simulator.log().split(separator: "\n").first { $0.contains("hci1 advertises") }, "\(simulator.log())")
            #expect(registered.contains("(29 bytes, solicited 1805 \(custom))"), "\(registered)")
            let scan = try await ChildProcess.run(
                gattway, ["scan", "--adapter", "hci0", "--duration", "3s", "--json"], environment: environment)
            #expect(scan.status == 0, "\(scan.output)")
            let line = try #require(
                scan.output.split(separator: "\n").first { $0.contains("00:AA:02:00:00:00") }, "\(scan.output)")
            #expect(line.contains(#""name":"gw""#), "\(line)")
        }
    }
}
