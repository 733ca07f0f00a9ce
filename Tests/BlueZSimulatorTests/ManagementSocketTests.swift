import BlueZSimulator
import Bluetooth
import BluetoothManagement
import DBus
import Foundation
import LocalSystem
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The kernel's Bluetooth management protocol as the simulator serves it (docs/simulator.md,
/// "Management socket"): real client sockets on the simulator's Unix SOCK_SEQPACKET socket, its
/// adapters and scans driven over D-Bus as bluetoothd's clients drive them.
@Suite("Management socket: commands, Device Found per report, clients")
struct ManagementSocketTests {
    static let battery = "A4:C1:38:00:00:01"
    /// A non-connectable, non-discoverable beacon with a static random address: bluetoothd's
    /// unfiltered scan hides it, the kernel reports it all the same.
    static let beacon = "C4:C1:38:00:00:07"

    static let scenario = """
        {
          \(TestScenarios.timing),
          "adapters": [{"name": "hci0", "address": "00:AA:01:00:00:00", "alias": "sim-zero"},
                       {"name": "hci1", "address": "00:AA:01:00:00:01", "present": false}],
          "devices": [
            {"address": "\(battery)", "name": "Battery", "rssi": -58, "interval": "50ms", "service_uuids": ["180F"],
             "service_data": {"180F": {"hex": "64"}}},
            {"address": "\(beacon)", "address_type": "random", "rssi": -71, "interval": "50ms", "connectable": false,
             "discoverable": false, "service_data": {"181A": {"hex": "a1 b2 c3"}}}
          ]
        }
        """

    @Test("Read Version, Index List and Controller Information are answered as the kernel answers them")
    func commands() async throws {
        try await SimulatorHarness.run(Self.scenario, managementSocket: true) { harness in
            let client = try ManagementClient(path: try #require(harness.managementSocket))
            let version = try await client.command(ManagementCommand.readVersion())
            #expect(version.status == ManagementCommand.Status.success)
            #expect(try ManagementVersion.decode(version.parameters) == ManagementVersion(version: 1, revision: 22))

            let list = try await client.command(ManagementCommand.readControllerIndexList())
            #expect(try ManagementCommand.decodeIndexList(list.parameters) == [0])

            let info = try await client.command(ManagementCommand.readControllerInfo(controller: 0))
            #expect(info.controller == 0)
            let controller = try ControllerInfo.decode(info.parameters)
            #expect(controller.address == BluetoothAddress("00:AA:01:00:00:00"))
            #expect(controller.name == "sim-zero")
            #expect(controller.currentSettings & ControllerInfo.Setting.powered != 0)
            #expect(controller.currentSettings & ControllerInfo.Setting.lowEnergy != 0)

            // hci1 is not plugged in; Read Version is about no controller.
            let absent = try await client.command(ManagementCommand.readControllerInfo(controller: 1))
            #expect(absent.isStatus && absent.status == ManagementCommand.Status.invalidIndex)
            let versionOfZero = try await client.command(ManagementPacket(code: 0x0001, controller: 0))
            #expect(versionOfZero.status == ManagementCommand.Status.invalidIndex)
            // Set Powered (0x0005) is not served: Unknown Command, and the client stays.
            let unknown = try await client.command(ManagementPacket(code: 0x0005, controller: 0, parameters: [1]))
            #expect(unknown.isStatus && unknown.opcode == 0x0005)
            #expect(unknown.status == ManagementCommand.Status.unknownCommand)
            #expect(try await client.command(ManagementCommand.readVersion()).status == 0)

            // Powered off over D-Bus: New Settings without the powered bit; plugged in: Index Added.
            let bus = try await harness.client()
            try await bus.control("SetPowered", [.string("hci0"), .boolean(false)])
            let settings = try await client.nextEvent("New Settings") {
                if case .newSettings(0, _) = $0 { true } else { false }
            }
            guard case .newSettings(_, let bits) = settings else { return }
            #expect(bits & ControllerInfo.Setting.powered == 0)
            try await bus.control("SetPresent", [.string("hci1"), .boolean(true)])
            try await client.nextEvent("Index Added") { $0 == .indexAdded(controller: 1) }
            let both = try await client.command(ManagementCommand.readControllerIndexList())
            #expect(try ManagementCommand.decodeIndexList(both.parameters) == [0, 1])
            await bus.close()
        }
    }

    @Test(
        "Load Connection Parameters as kernel 6.1 takes it: a bad length or controller refused, an entry the kernel's check refuses skipped, each command replacing the last; the next link uses what is loaded"
    )
    func loadConnectionParameters() async throws {
        try await SimulatorHarness.run(Self.scenario, managementSocket: true) { harness in
            let client = try ManagementClient(path: try #require(harness.managementSocket))
            let address = try #require(BluetoothAddress(Self.battery))
            func entry(_ values: ConnectionParameters) -> ConnectionParameterEntry {
                ConnectionParameterEntry(address: address, addressType: .lePublic, parameters: values)
            }
            let fast = ConnectionParameters(minInterval: 6, maxInterval: 12, latency: 2, supervisionTimeout: 400)
            let load = ManagementCommand.loadConnectionParameters(controller: 0, entries: [entry(fast)])
            var short = load
            short.parameters.removeLast()
            let refused = try await client.command(short)
            #expect(refused.isStatus && refused.status == ManagementCommand.Status.invalidParameters)
            var absent = load
            absent.controller = 1
            #expect(try await client.command(absent).status == ManagementCommand.Status.invalidIndex)
            // Timeout exactly (1 + latency) · max · 2: the kernel takes it (the Core spec would not).
            let edge = ConnectionParameters(minInterval: 6, maxInterval: 40, latency: 4, supervisionTimeout: 50)
            #expect(edge.problem() != nil)
            let edgeReply = try await client.command(
                ManagementCommand.loadConnectionParameters(controller: 0, entries: [entry(edge)]))
            #expect(!edgeReply.isStatus && edgeReply.status == ManagementCommand.Status.success)
            // An entry the kernel refuses is skipped (success all the same), and the command
            // replaced the edge entry: the link gets the defaults.
            let invalid = ConnectionParameters(minInterval: 12, maxInterval: 6, latency: 0, supervisionTimeout: 400)
            let skipped = try await client.command(
                ManagementCommand.loadConnectionParameters(controller: 0, entries: [entry(invalid)]))
            #expect(skipped.status == ManagementCommand.Status.success)

            let bus = try await harness.client()
            try await bus.call("/org/bluez/hci0", Client.adapter, "StartDiscovery")
            let known = try await poll(within: 10) {
                (try? await bus.get(TestScenarios.battery, Client.device, "Address")) != nil ? true : nil
            }
            #expect(known == true)
            try await bus.call("/org/bluez/hci0", Client.adapter, "StopDiscovery")
            try await bus.call(TestScenarios.battery, Client.device, "Connect")
            let defaults = try await harness.simulator.linkParameters(address: Self.battery)
            #expect(defaults.interval == 40 && defaults.latency == 0 && defaults.supervisionTimeout == 42)
            try await bus.call(TestScenarios.battery, Client.device, "Disconnect")

            #expect(try await client.command(load).status == ManagementCommand.Status.success)
            try await bus.call(TestScenarios.battery, Client.device, "Connect")
            let loaded = try await harness.simulator.linkParameters(address: Self.battery)
            #expect(loaded.interval == 12 && loaded.latency == 2 && loaded.supervisionTimeout == 400)
            await bus.close()
        }
    }

    @Test("a D-Bus scan gives every client one Device Found per advertising report, unchanged data included")
    func deviceFoundPerReport() async throws {
        try await SimulatorHarness.run(Self.scenario, managementSocket: true) { harness in
            let path = try #require(harness.managementSocket)
            let first = try ManagementClient(path: path)
            let second = try ManagementClient(path: path)
            _ = try await first.command(ManagementCommand.readVersion())  // both accepted before the scan
            _ = try await second.command(ManagementCommand.readVersion())
            let bus = try await harness.client()
            let signals = try await bus.signals()
            let before = await harness.simulator.counterValues().advertisementReports
            let started = Date()
            try await bus.call("/org/bluez/hci0", Client.adapter, "StartDiscovery")
            try await first.nextEvent("Discovering on") {
                $0 == .discovering(controller: 0, addressType: 0x06, discovering: true)
            }
            try await eventually("10 reports of each device") { first.found.count >= 20 }
            try await bus.call("/org/bluez/hci0", Client.adapter, "StopDiscovery")
            let elapsed = Date().timeIntervalSince(started)
            for client in [first, second] {
                try await client.nextEvent("Discovering off") {
                    $0 == .discovering(controller: 0, addressType: 0x06, discovering: false)
                }
            }
            let reports = await harness.simulator.counterValues().advertisementReports - before

            // One event per report, to each client: none missing, none extra.
            #expect(first.found.count == reports)
            #expect(second.found.count == reports)
            #expect(first.found == second.found)
            // The schedule: 50 ms apart at least (plus a phase), so never more than this.
            #expect(reports <= 2 * (Int(elapsed / 0.05) + 1))

            let battery = first.found.filter { $0.address == BluetoothAddress(Self.battery) }
            let beacon = first.found.filter { $0.address == BluetoothAddress(Self.beacon) }
            #expect(battery.count >= 10 && beacon.count >= 10)
            let sample = try #require(battery.last)
            #expect(sample.addressType == .lePublic && sample.rssi == -58 && sample.isConnectable)
            #expect(sample.advertisementData.serviceData[BluetoothUUID("180F")!] == [0x64])
            #expect(sample.advertisementData.localName == "Battery")
            let broadcaster = try #require(beacon.last)
            #expect(broadcaster.addressType == .leRandom && broadcaster.rssi == -71)
            #expect(broadcaster.flags & DeviceFound.notConnectable != 0)
            #expect(broadcaster.advertisementData.serviceData[BluetoothUUID("181A")!] == [0xA1, 0xB2, 0xC3])

            // bluetoothd signalled the battery's unchanging data once; the kernel reported every
            // advertisement. The beacon (not discoverable, unfiltered scan) is not on D-Bus at all.
            let changes = signals.all.filter {
                $0.isPropertiesChanged(TestScenarios.battery, Client.device) && $0.changed["ServiceData"] != nil
            }
            #expect(changes.count <= 1)
            #expect(!signals.all.contains { $0.isInterfacesAdded("/org/bluez/hci0/dev_C4_C1_38_00_00_07") })
            await bus.close()
        }
    }

    @Test(
        "an advertisement monitor makes a passive scan: Advertisement Monitor Device Found (handle 0) for every report, no scan response, until removed"
    )
    func monitorScansPassively() async throws {
        try await SimulatorHarness.run(Self.scenario, managementSocket: true) { harness in
            let path = try #require(harness.managementSocket)
            let adder = try ManagementClient(path: path)
            let other = try ManagementClient(path: path)
            _ = try await other.command(ManagementCommand.readVersion())
            // No pattern: refused, as kernel 6.1 refuses it; nothing scans.
            let empty = try await adder.command(
                ManagementCommand.addAdvertisementPatternsMonitor(controller: 0, patterns: []))
            #expect(empty.isStatus && empty.status == ManagementCommand.Status.invalidParameters)
            let added = try await adder.command(
                ManagementCommand.addAdvertisementPatternsMonitor(
                    controller: 0, patterns: [AdvertisementPattern(adType: 0x01, value: [0x06])]))
            #expect(added.status == ManagementCommand.Status.success)
            let handle = try ManagementCommand.decodeMonitorHandle(added.parameters, command: added.opcode)
            #expect(handle != 0)
            try await other.nextEvent("Advertisement Monitor Added") {
                $0 == .advertisementMonitorAdded(controller: 0, handle: handle)
            }
            // Both devices, the beacon too (the pattern is not applied without offload), while no
            // discovery runs; the monitor outlives the client that added it.
            try await eventually("passive reports of both devices") {
                Set(other.found.map(\.address)).count == 2
            }
            let passive = other.found
            #expect(passive.allSatisfy { $0.monitorHandle == 0 })
            #expect(passive.allSatisfy { $0.advertisementData.localName == nil })
            #expect(
                passive.contains {
                    $0.address == BluetoothAddress(Self.battery)
                        && $0.advertisementData.serviceData[BluetoothUUID("180F")!] == [0x64]
                })
            #expect(!other.events.contains { if case .discovering = $0 { true } else { false } })

            // A discovery takes over: Device Found, with the name (scan response) again.
            let bus = try await harness.client()
            try await bus.call("/org/bluez/hci0", Client.adapter, "StartDiscovery")
            try await other.nextEvent("Discovering on") {
                $0 == .discovering(controller: 0, addressType: 0x06, discovering: true)
            }
            try await eventually("an active report with the name") {
                other.found.contains { $0.monitorHandle == nil && $0.advertisementData.localName == "Battery" }
            }
            try await bus.call("/org/bluez/hci0", Client.adapter, "StopDiscovery")
            try await other.nextEvent("Discovering off") {
                $0 == .discovering(controller: 0, addressType: 0x06, discovering: false)
            }
            let afterDiscovery = other.found.count
            try await eventually("passive reports again after the discovery") {
                other.found.dropFirst(afterDiscovery).contains { $0.monitorHandle == 0 }
            }

            // Removed (by a client other than the one that added it): the passive scan stops.
            let unknown = try await other.command(
                ManagementCommand.removeAdvertisementMonitor(controller: 0, handle: 999))
            #expect(unknown.status == ManagementCommand.Status.invalidParameters)
            let removed = try await other.command(
                ManagementCommand.removeAdvertisementMonitor(controller: 0, handle: handle))
            #expect(removed.status == ManagementCommand.Status.success)
            try await adder.nextEvent("Advertisement Monitor Removed") {
                $0 == .advertisementMonitorRemoved(controller: 0, handle: handle)
            }
            let stopped = other.found.count
            try await Task.sleep(for: .milliseconds(300))  // six advertising intervals
            #expect(other.found.count == stopped)
            await bus.close()
        }
    }

    @Test(
        "a link going down gives Device Disconnected with the reason: the peer ended it, it went out of range, we ended it"
    )
    func disconnectReasons() async throws {
        try await SimulatorHarness.run(Self.scenario, managementSocket: true) { harness in
            let client = try ManagementClient(path: try #require(harness.managementSocket))
            let bus = try await harness.client()
            let log = try await bus.signals()
            let path = "/org/bluez/hci0/dev_A4_C1_38_00_00_01"
            try await bus.call("/org/bluez/hci0", Client.adapter, "StartDiscovery")
            try await log.wait(for: "battery found") { $0.isInterfacesAdded(path) }
            let address = try #require(BluetoothAddress(Self.battery))
            let ways: [(String, DisconnectReason)] = [
                ("Terminate", .remote), ("Disconnect", .timeout), ("", .localHost),
            ]
            for (control, reason) in ways {
                try await bus.call(path, Client.device, "Connect")
                if control.isEmpty {
                    try await bus.call(path, Client.device, "Disconnect")
                } else {
                    _ = try await bus.control(control, [.string(Self.battery)])
                }
                try await client.nextEvent(
                    "Device Disconnected after \(control.isEmpty ? "Device1.Disconnect" : control)"
                ) {
                    $0 == .deviceDisconnected(controller: 0, address: address, addressType: .lePublic, reason: reason)
                }
            }
            await bus.close()
        }
    }

    @Test("the simulated bluetoothd's start removes every monitor, as bluetoothd 5.66 does")
    func restartRemovesMonitors() async throws {
        try await SimulatorHarness.run(Self.scenario, managementSocket: true) { harness in
            let client = try ManagementClient(path: try #require(harness.managementSocket))
            let added = try await client.command(
                ManagementCommand.addAdvertisementPatternsMonitor(
                    controller: 0, patterns: [AdvertisementPattern(adType: 0x01, value: [0x06])]))
            let handle = try ManagementCommand.decodeMonitorHandle(added.parameters, command: added.opcode)
            let bus = try await harness.client()
            try await bus.control("Crash", [.double(0.2)])
            await bus.close()
            try await client.nextEvent("Advertisement Monitor Removed") {
                $0 == .advertisementMonitorRemoved(controller: 0, handle: handle)
            }
        }
    }

    @Test("a malformed packet drops only the client that sent it")
    func malformedDropsOneClient() async throws {
        try await SimulatorHarness.run(Self.scenario, managementSocket: true) { harness in
            let path = try #require(harness.managementSocket)
            let bad = try ManagementClient(path: path)
            let good = try ManagementClient(path: path)
            _ = try await good.command(ManagementCommand.readVersion())
            // The header says two parameter bytes; none follow.
            bad.send([0x01, 0x00, 0xFF, 0xFF, 0x02, 0x00])
            try await eventually("the bad client hung up") { bad.isClosed() }
            #expect(try await good.command(ManagementCommand.readVersion()).status == 0)
            let statistics = try #require(await harness.simulator.managementStatistics)
            #expect(statistics.malformed == 1 && statistics.accepted == 2)
            // A new client is served as before.
            let again = try ManagementClient(path: path)
            #expect(try await again.command(ManagementCommand.readControllerIndexList()).status == 0)
        }
    }
}

/// A reply of the simulator: Command Complete or Command Status.
struct ManagementReply {
    var isStatus: Bool
    var opcode: UInt16
    var status: UInt8
    var controller: UInt16
    var parameters: [UInt8]
}

/// One client of the management socket: a blocking-free `SOCK_SEQPACKET` socket polled by the
/// test; events other than replies are kept in order (``events``, ``found``).
final class ManagementClient: @unchecked Sendable {
    // Used by one test task at a time; the lock guards the state against the polling closures.
    private let fd: Int32
    private let lock = NSLock()
    private var received: [ManagementEvent] = []

    init(path: String) throws {
        fd = socket(
            AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard let address = UnixSocketAddress(path) else { throw HarnessTimeout(description: "socket path \(path)") }
        let result = address.withSockaddr { connect(fd, $0, $1) }
        guard result == 0 else { throw HarnessTimeout(description: "connect \(path): errno \(errno)") }
    }

    deinit { close(fd) }

    func send(_ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Reads what is waiting; false when the simulator hung up.
    @discardableResult
    private func drain() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 70_000)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count == 0 { return false }
            if count < 0 { return errno == EAGAIN || errno == EWOULDBLOCK }
            if let event = try? ManagementEvent.decode(ManagementPacket.decode(Array(buffer[0..<count]))) {
                lock.withLock { received.append(event) }
            }
        }
    }

    func isClosed() -> Bool { !drain() }

    var events: [ManagementEvent] {
        drain()
        return lock.withLock { received }
    }

    var found: [DeviceFound] {
        events.compactMap { if case .deviceFound(let found) = $0 { found } else { nil } }
    }

    /// Sends a command and waits for its Command Complete or Command Status (taken out of ``events``).
    func command(_ packet: ManagementPacket) async throws -> ManagementReply {
        send(packet.bytes)
        let reply = try await poll(within: defaultWait) { () -> ManagementReply? in
            drain()
            return lock.withLock {
                guard let index = received.firstIndex(where: { Self.reply($0, to: packet.code) != nil }) else {
                    return nil
                }
                return Self.reply(received.remove(at: index), to: packet.code)
            }
        }
        guard let reply else { throw HarnessTimeout(description: "no reply to command \(packet.code)") }
        return reply
    }

    private static func reply(_ event: ManagementEvent, to code: UInt16) -> ManagementReply? {
        switch event {
        case .commandComplete(let opcode, let status, let controller, let parameters) where opcode == code:
            ManagementReply(
                isStatus: false, opcode: opcode, status: status, controller: controller, parameters: parameters)
        case .commandStatus(let opcode, let status, let controller) where opcode == code:
            ManagementReply(isStatus: true, opcode: opcode, status: status, controller: controller, parameters: [])
        default: nil
        }
    }

    /// Waits for an event satisfying `predicate`.
    @discardableResult
    func nextEvent(_ what: String, _ predicate: @escaping (ManagementEvent) -> Bool) async throws -> ManagementEvent {
        guard let event = try await poll(within: defaultWait, { events.first(where: predicate) }) else {
            throw HarnessTimeout(description: "no \(what) event; got \(events.filter { !Self.isFound($0) })")
        }
        return event
    }

    private static func isFound(_ event: ManagementEvent) -> Bool {
        if case .deviceFound = event { true } else { false }
    }
}
