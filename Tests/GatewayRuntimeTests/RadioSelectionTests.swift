import BlueZ
import BlueZSimulator
import BluetoothManagement
import EventLoop
import Foundation
import Gateway
import GatewayRuntime
import TestSupport
import Testing

/// `bluetooth.radio` at the start of the central's service: which path the scans read, the log
/// line that says why, and a refused start for `mgmt` without a management socket.
@Suite("bluetooth.radio")
struct RadioSelectionTests {
    static func withCentral(
        radio: String, scanMode: String = "active", adapters: [String] = ["hci0"], endpoint: ManagementEndpoint,
        _ body: (BlueZCentralService, Journal) async throws -> Void
    ) async throws {
        let daemon = try await DBusDaemon()
        defer { daemon.stop() }
        let loop = EventLoop(name: "radio-test")
        defer { loop.shutdown() }
        let simulator = try await BlueZSimulator.start(
            scenario: try Scenario.parse(Data(CentralBLEPortTests.scenario.utf8)), bus: .address(daemon.address),
            on: loop)
        let config = try GatewayConfig.parse(
            Array(
                #"{"bluetooth": {"radio": "\#(radio)", "scan_mode": "\#(scanMode)", "adapters": \#(adapters)}}"#.utf8))
        let journal = Journal()
        let service = BlueZCentralService(
            config: config, stateDirectory: nil, bus: .address(daemon.address), loop: loop, log: journal.logger,
            radioEndpoint: endpoint)
        do {
            try await body(service, journal)
        } catch {
            _ = await service.stop(within: StopDeadline())
            await simulator.stop()
            throw error
        }
        _ = await service.stop(within: StopDeadline())
        await simulator.stop()
    }

    static let nobody = ManagementEndpoint.socket(path: "/nonexistent/gattway-mgmt.sock")

    @Test("mgmt without a management socket refuses to start, saying why and what to set instead")
    func mgmtRefuses() async throws {
        try await Self.withCentral(radio: "mgmt", endpoint: Self.nobody) { service, _ in
            do {
                try await service.start()
                Issue.record("started without a management socket")
            } catch {
                #expect(ExitCode(for: error) == .failure)
                let text = "\(error)"
                #expect(text.contains("bluetooth.radio is mgmt"), "\(text)")
                #expect(text.contains("/nonexistent/gattway-mgmt.sock"), "\(text)")
                #expect(text.contains("\"dbus\""), "\(text)")
            }
        }
    }

    @Test("auto without a management socket reads D-Bus and says why in one log line")
    func autoFallsBack() async throws {
        try await Self.withCentral(radio: "auto", endpoint: Self.nobody) { service, journal in
            try await service.start()
            #expect(service.radio == nil)
            #expect(await service.central?.reports == .bluez)
            let lines = journal.logLines.filter { $0.contains("radio:") }
            #expect(lines.count == 1)
            #expect(
                lines.first?.contains("D-Bus view, because cannot connect to the management socket") == true, "\(lines)"
            )
        }
    }

    @Test("dbus never opens the socket")
    func dbusStaysOnDBus() async throws {
        let peer = try SeqPacketPeer()
        try await Self.withCentral(radio: "dbus", endpoint: .socket(path: peer.path)) { service, journal in
            try await service.start()
            #expect(service.radio == nil)
            #expect(await service.central?.reports == .bluez)
            #expect(
                journal.logLines.contains { $0.contains("radio: bluetoothd's D-Bus view (bluetooth.radio is dbus)") })
            await #expect(throws: TestTimeout.self) { try await peer.accept(within: 0.2) }
        }
    }

    @Test("scan_mode passive on the D-Bus path refuses to start, saying why; auto there scans actively and says so")
    func passiveNeedsTheManagementSocket() async throws {
        try await Self.withCentral(radio: "dbus", scanMode: "passive", endpoint: Self.nobody) { service, _ in
            do {
                try await service.start()
                Issue.record("started passive on the D-Bus path")
            } catch {
                let text = "\(error)"
                #expect(text.contains("bluetooth.scan_mode is passive"), "\(text)")
                #expect(text.contains("bluetoothd -E"), "\(text)")
            }
        }
        try await Self.withCentral(radio: "auto", scanMode: "auto", endpoint: Self.nobody) { service, journal in
            try await service.start()
            #expect(
                journal.logLines.contains { $0.contains("scan mode: active, because auto scans passively only on") },
                "\(journal.logLines)")
        }
    }

    @Test("auto with a management socket that answers switches the central's scans to it")
    func autoTakesTheSocket() async throws {
        let peer = try SeqPacketPeer()
        try await Self.withCentral(radio: "auto", endpoint: .socket(path: peer.path)) { service, journal in
            let serving = Task {
                try await peer.accept()
                try await KernelRadioTestsSupport.answer(peer, version: (1, 22), controllers: [0])
            }
            try await service.start()
            try await serving.value
            #expect(service.radio != nil)
            #expect(await service.central?.reports == .kernel)
            #expect(
                journal.logLines.contains {
                    $0.contains("radio: the management socket at \(peer.path), management interface 1.22")
                },
                "\(journal.logLines)")
            // The served socket goes away: the scans read D-Bus again, and the log says so.
            peer.hangUp()
            try await eventually("back on D-Bus") { await service.central?.reports == .bluez }
            #expect(journal.logLines.contains { $0.contains("closed; reading bluetoothd's D-Bus view from now on") })
        }
    }

    @Test(
        "two adapters share one management socket: both centrals read it, the log names the adapter the kernel lacks, and both go back to D-Bus when it closes"
    )
    func twoAdaptersOneSocket() async throws {
        let peer = try SeqPacketPeer()
        try await Self.withCentral(radio: "auto", adapters: ["hci0", "hci1"], endpoint: .socket(path: peer.path)) {
            service, journal in
            let serving = Task {
                try await peer.accept()
                try await KernelRadioTestsSupport.answer(peer, version: (1, 22), controllers: [0])
            }
            try await service.start()
            try await serving.value
            let centrals = try #require(service.adapters?.centrals)
            #expect(centrals.count == 2)
            for central in centrals { #expect(await central.reports == .kernel) }
            #expect(
                journal.logLines.contains { $0.contains("(hci1 is not among its controllers yet)") },
                "\(journal.logLines)")
            #expect(
                journal.logLines.contains { $0.contains("adapters: hci0, hci1 scan together") }, "\(journal.logLines)")
            peer.hangUp()
            for central in centrals { try await eventually("back on D-Bus") { await central.reports == .bluez } }
        }
    }
}

/// The far end of the version and index-list requests of a radio's start.
enum KernelRadioTestsSupport {
    static func answer(_ peer: SeqPacketPeer, version: (UInt8, UInt16), controllers: [UInt16]) async throws {
        for _ in 0..<2 {
            let bytes = try await peer.receive()
            let request = try bytes.withUnsafeBytes { try ManagementPacket.decode($0) }
            let reply: [UInt8] =
                request.code == ManagementCommand.Code.readVersion
                ? ManagementVersion(version: version.0, revision: version.1).parameters
                : ManagementCommand.encodeIndexList(controllers)
            try await peer.send(
                ManagementEvent.commandComplete(opcode: request.code, status: 0, controller: 0xFFFF, parameters: reply)
                    .packet.bytes)
        }
    }
}
