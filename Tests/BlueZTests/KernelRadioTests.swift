import BlueZ
import Bluetooth
import BluetoothManagement
import EventLoop
import Foundation
import LocalSystem
import Synchronization
import TestSupport
import Testing

/// `KernelRadio` against a served management socket (a `SeqPacketPeer` playing the kernel), and
/// the central's scans on the kernel's reports with the simulator's bluetoothd beside it.
@Suite("KernelRadio")
struct KernelRadioTests {
    /// A BTHome v2 advertisement: Flags, service data FCD2 with packet id `id` and a temperature.
    static func bthome(_ id: UInt8, name: String? = nil) -> [UInt8] {
        var bytes: [UInt8] = [0x02, 0x01, 0x06, 0x09, 0x16, 0xD2, 0xFC, 0x40, 0x00, id, 0x02, 0xC4, 0x09]
        if let name {
            bytes += [UInt8(name.utf8.count + 1), 0x09] + Array(name.utf8)
        }
        return bytes
    }

    static let sensor = BluetoothAddress("C4:7C:8D:6A:00:01")!

    static func found(_ id: UInt8, controller: UInt16 = 0, name: String? = nil, rssi: Int8 = -61) -> [UInt8] {
        ManagementEvent.deviceFound(
            DeviceFound(
                controller: controller, address: sensor, addressType: .leRandom, rssi: rssi,
                flags: DeviceFound.notConnectable, data: bthome(id, name: name))
        ).packet.bytes
    }

    /// Answers the version request the test makes.
    static func answerVersion(_ peer: SeqPacketPeer) async throws {
        let request = try await peer.receive()
        #expect(Array(request.prefix(2)) == [0x01, 0x00], "Read Management Version Information")
        try await peer.send(
            ManagementEvent.commandComplete(opcode: 0x0001, status: 0, controller: 0xFFFF, parameters: [1, 22, 0])
                .packet.bytes)
    }

    /// The packet ids of the reports a radio handed on, in order.
    final class ReportIDs: Sendable {
        private let ids = Mutex<[UInt8]>([])
        func append(_ id: UInt8) { ids.withLock { $0.append(id) } }
        func withLock<R>(_ body: ([UInt8]) -> R) -> R { ids.withLock { body($0) } }
    }

    /// A radio on `peer`'s socket that records each report's packet id, once `peer` accepted it.
    static func openRecordingIDs(_ peer: SeqPacketPeer, on loop: EventLoop) async throws -> (KernelRadio, ReportIDs) {
        let seen = ReportIDs()
        let radio = try await KernelRadio.open(.socket(path: peer.path), loop: loop) { found in
            seen.append(found.data[9])
        }
        try await peer.accept()
        return (radio, seen)
    }

    @Test("every Device Found is handed on once, in order; malformed packets are counted and dropped")
    func deliversEveryReport() async throws {
        let peer = try SeqPacketPeer()
        let loop = EventLoop(name: "radio-test")
        defer { loop.shutdown() }
        let seen = Mutex<[DeviceFound]>([])
        let radio = try await KernelRadio.open(.socket(path: peer.path), loop: loop) { found in
            seen.withLock { $0.append(found) }
        }
        try await peer.accept()
        async let answered: Void = Self.answerVersion(peer)
        #expect(try await radio.version(timeout: 30) == ManagementVersion(version: 1, revision: 22))
        try await answered
        try await peer.send(Self.found(1))
        try await peer.send([0x12, 0x00, 0x00])  // a header cut short
        try await peer.send([0x12, 0x00, 0x00, 0x00, 0x40, 0x00, 1, 2])  // says 64 bytes, carries 2
        try await peer.send(ManagementEvent.other(code: 0x7777, controller: 9).packet.bytes)  // unknown: ignored
        try await peer.send(Self.found(2))
        try await peer.send(Self.found(2))  // a repeat is a report too
        try await eventually("three reports") { seen.withLock { $0.count } == 3 }
        #expect(seen.withLock { $0.map(\.data[9]) } == [1, 2, 2])
        #expect(seen.withLock { $0[0].address } == Self.sensor)
        #expect(await radio.droppedPackets == 2)
        #expect(await radio.reports == 3)
        await radio.close()
    }

    @Test(
        "with coalescing, reports that come while the socket rests wait for the rest's end; a command's answer does not"
    )
    func coalescing() async throws {
        let peer = try SeqPacketPeer()
        let loop = EventLoop(name: "radio-test")
        defer { loop.shutdown() }
        let (radio, seen) = try await Self.openRecordingIDs(peer, on: loop)
        // A rest far longer than the test: whatever ends it early is the answer, not the clock
        // (a loaded machine may take seconds for any step here).
        await radio.setCoalescing(600)
        try await peer.send(Self.found(1))
        try await eventually("the first report, at once") { seen.withLock { $0 } == [1] }
        // The socket rests now: a report waits, but a command's answer is read at once (asking
        // ends the rest), and the report with it.
        try await peer.send(Self.found(2))
        try await Task.sleep(for: .milliseconds(200))
        #expect(seen.withLock { $0 } == [1], "read during the rest")
        async let answered: Void = Self.answerVersion(peer)
        #expect(try await radio.version(timeout: 30) == ManagementVersion(version: 1, revision: 22))
        try await answered
        try await eventually("the waiting report") { seen.withLock { $0 } == [1, 2] }
        await radio.close()
    }

    @Test(
        "a link's Device Disconnected is kept with its reason, found although the socket was not read yet, taken once")
    func disconnectReasons() async throws {
        let peer = try SeqPacketPeer()
        let loop = EventLoop(name: "radio-test")
        defer { loop.shutdown() }
        let (radio, _) = try await Self.openRecordingIDs(peer, on: loop)
        // A rest far longer than the test: the events wait in the socket until asked.
        await radio.setCoalescing(600)
        try await peer.send(Self.found(1))
        try await peer.send(
            ManagementEvent.deviceDisconnected(
                controller: 1, address: Self.sensor, addressType: .lePublic, reason: .remote
            )
            .packet.bytes)
        try await peer.send(
            ManagementEvent.deviceDisconnected(
                controller: 0, address: Self.sensor, addressType: .lePublic, reason: .timeout
            )
            .packet.bytes)
        #expect(await radio.disconnectReason(controller: 1, address: Self.sensor) == .remote)
        #expect(await radio.disconnectReason(controller: 1, address: Self.sensor) == nil, "taken once")
        #expect(await radio.disconnectReason(controller: 0, address: Self.sensor) == .timeout)
        #expect(await radio.disconnectReason(controller: 0, address: BluetoothAddress(rawValue: 1)) == nil)
        await radio.close()
    }

    @Test("a burst of 2,000 reports sent at once all arrive, in order, over several turns of the loop")
    func burst() async throws {
        let peer = try SeqPacketPeer()
        let loop = EventLoop(name: "radio-test")
        defer { loop.shutdown() }
        let (radio, seen) = try await Self.openRecordingIDs(peer, on: loop)
        for index in 0..<2000 { try await peer.send(Self.found(UInt8(index % 256))) }
        try await eventually("2,000 reports") { seen.withLock { $0.count } == 2000 }
        #expect(seen.withLock { $0 } == (0..<2000).map { UInt8($0 % 256) })
        await radio.close()
    }

    @Test("a peer that hangs up closes the radio (the closed handler is told once); a request then fails at once")
    func hangUp() async throws {
        let peer = try SeqPacketPeer()
        let loop = EventLoop(name: "radio-test")
        defer { loop.shutdown() }
        let closings = Mutex(0)
        let radio = try await KernelRadio.open(
            .socket(path: peer.path), loop: loop, deliver: { _ in }, closed: { closings.withLock { $0 += 1 } })
        try await peer.accept()
        peer.hangUp()
        try await eventually("closed", within: 60) { closings.withLock { $0 } == 1 }
        #expect(await !radio.isOpen)
        await #expect(throws: KernelRadioError.self) { try await radio.version() }
        #expect(closings.withLock { $0 } == 1)
    }

    @Test(
        "Load Connection Parameters carries every entry loaded for the controller, a device's newest replacing its older one, the newest 64 at most"
    )
    func connectionParameters() async throws {
        let peer = try SeqPacketPeer()
        let loop = EventLoop(name: "radio-test")
        defer { loop.shutdown() }
        let radio = try await KernelRadio.open(.socket(path: peer.path), loop: loop) { _ in }
        try await peer.accept()
        func entry(_ id: UInt64, _ latency: UInt16 = 0) -> ConnectionParameterEntry {
            ConnectionParameterEntry(
                address: BluetoothAddress(rawValue: 0xA4C1_3800_0000 + id), addressType: .lePublic,
                parameters: ConnectionParameters(
                    minInterval: 6, maxInterval: 12, latency: latency, supervisionTimeout: 400))
        }
        /// Loads `entry` on controller 1, answers as the kernel, and returns the entries sent.
        func load(_ entry: ConnectionParameterEntry) async throws -> [ConnectionParameterEntry] {
            async let loaded: Void = radio.loadConnectionParameters(entry, controller: 1)
            let sent = try ManagementPacket.decode(try await peer.receive())
            #expect(sent.code == ManagementCommand.Code.loadConnectionParameters && sent.controller == 1)
            try await peer.send(
                ManagementEvent.commandComplete(opcode: sent.code, status: 0, controller: 1, parameters: []).packet
                    .bytes)
            try await loaded
            return try ConnectionParameterEntry.decodeList(sent.parameters)
        }
        #expect(try await load(entry(1)) == [entry(1)])
        #expect(try await load(entry(2)) == [entry(1), entry(2)])
        #expect(try await load(entry(1, 3)) == [entry(2), entry(1, 3)])
        #expect(await radio.loadedConnectionParameters(entry(1).address, controller: 1)?.latency == 3)
        #expect(await radio.loadedConnectionParameters(entry(1).address, controller: 0) == nil)
        for id in 3...KernelRadio.maxConnectionParameters { _ = try await load(entry(UInt64(id))) }
        let full = try await load(entry(1000))
        #expect(full.count == KernelRadio.maxConnectionParameters)
        #expect(full.first == entry(1, 3) && full.last == entry(1000), "entry 2, the oldest, went")
        await radio.close()
    }

    @Test("a request without an answer fails after its timeout; the radio stays open")
    func requestTimeout() async throws {
        let peer = try SeqPacketPeer()
        let loop = EventLoop(name: "radio-test")
        defer { loop.shutdown() }
        let radio = try await KernelRadio.open(.socket(path: peer.path), loop: loop) { _ in }
        try await peer.accept()
        await #expect(throws: KernelRadioError.self) { try await radio.version(timeout: 0.2) }
        _ = try await peer.receive()  // the request that got no answer
        #expect(await radio.isOpen)
        await radio.close()
    }

    @Test("opening a socket nobody serves fails with the path in the message")
    func nobodyServes() async throws {
        let loop = EventLoop(name: "radio-test")
        defer { loop.shutdown() }
        do {
            _ = try await KernelRadio.open(.socket(path: "/nonexistent/gattway-mgmt.sock"), loop: loop) { _ in }
            Issue.record("opened a socket nobody serves")
        } catch {
            #expect(error.description.contains("/nonexistent/gattway-mgmt.sock"))
        }
    }

    @Test("the endpoint comes from GATTWAY_MGMT_SOCKET, else the kernel's")
    func endpointFromEnvironment() {
        #expect(ManagementEndpoint.fromEnvironment([:]) == .kernel)
        #expect(ManagementEndpoint.fromEnvironment(["GATTWAY_MGMT_SOCKET": ""]) == .kernel)
        #expect(
            ManagementEndpoint.fromEnvironment(["GATTWAY_MGMT_SOCKET": "/run/x.sock"]) == .socket(path: "/run/x.sock"))
    }

    @Test(
        "with kernel reports a scan gets every report of its controller with the bytes, names carried over, and no report from D-Bus properties"
    )
    func centralOnKernelReports() async throws {
        try await CentralHarness.run(Scenarios.sensors()) { harness in
            let central = try await harness.central { $0.reports = .kernel }
            try await central.waitUntilPoweredOn(timeout: .seconds(10))
            let results = Mutex<[ScanResult]>([])
            let token = try await central.scan(ScanOptions(allowDuplicates: true)) { result in
                results.withLock { $0.append(result) }
            }
            let peer = try SeqPacketPeer()
            let radio = try await KernelRadio.open(.socket(path: peer.path), loop: harness.loop) { [central] found in
                central.assumeLoopIsolated { $0.kernelReport(found) }
            }
            try await peer.accept()
            try await peer.send(Self.found(1, name: "BTHome sensor"))
            try await peer.send(Self.found(2, controller: 1))  // another controller's: not this central's
            try await peer.send(Self.found(3, rssi: 127))
            try await peer.send(Self.found(3))
            try await eventually("three reports") { results.withLock { $0.count } >= 3 }
            // The simulator's devices advertise all along: none may arrive from their properties.
            try await Task.sleep(for: .milliseconds(300))
            let seen = results.withLock { $0 }
            #expect(seen.count == 3)
            #expect(seen.allSatisfy { $0.kernelReport != nil })
            #expect(seen.map { $0.kernelReport?.data[9] } == [1, 3, 3])
            #expect(seen[0].advertisementData.serviceData[BluetoothUUID(0xFCD2)] == [0x40, 0x00, 1, 0x02, 0xC4, 0x09])
            #expect(seen.map(\.advertisementData.localName) == ["BTHome sensor", "BTHome sensor", "BTHome sensor"])
            #expect(seen.map(\.rssi) == [-61, nil, -61])
            #expect(seen[0].peripheral.addressType == .random)
            await central.stopScan(token)
            await radio.close()
            await central.close()
        }
    }

    @Test(
        "a kernel report without a name takes BlueZ's name of the device, and one BlueZ learns later once it knows the device"
    )
    func namesFromBlueZ() async throws {
        try await CentralHarness.run(Scenarios.sensors()) { harness in
            let central = try await harness.central { $0.reports = .kernel }
            try await central.waitUntilPoweredOn(timeout: .seconds(10))
            let names = Mutex<[BluetoothAddress: [String?]]>([:])
            let token = try await central.scan(ScanOptions(allowDuplicates: true)) { result in
                names.withLock { $0[result.peripheral.address, default: []].append(result.advertisementData.localName) }
            }
            let peer = try SeqPacketPeer()
            let radio = try await KernelRadio.open(.socket(path: peer.path), loop: harness.loop) { [central] found in
                central.assumeLoopIsolated { $0.kernelReport(found) }
            }
            try await peer.accept()
            func report(_ address: BluetoothAddress) -> [UInt8] {
                ManagementEvent.deviceFound(
                    DeviceFound(
                        controller: 0, address: address, addressType: .lePublic, rssi: -60,
                        flags: DeviceFound.notConnectable, data: Self.bthome(1))
                ).packet.bytes
            }
            // The discovery (over D-Bus, beside the kernel's reports) makes BlueZ know the battery sensor.
            try await eventually("BlueZ knows the battery sensor") {
                await central.rememberedAdvertisementData(Scenarios.battery).localName == "Battery Sensor"
            }
            let late = BluetoothAddress("A4:C1:38:00:00:2A")!
            try await peer.send(report(Scenarios.battery))
            try await peer.send(report(late))
            try await peer.send(report(late))  // asked of BlueZ once: the answer (none) is kept
            try await eventually("three reports") { names.withLock { $0.values.map(\.count).reduce(0, +) } >= 3 }
            #expect(names.withLock { $0[Scenarios.battery] } == ["Battery Sensor"])
            #expect(names.withLock { $0[late] } == [nil, nil])
            // Now BlueZ learns the device and its name: the kept "none" must not hide it.
            try await harness.sim.addDevice(
                json: #"{"address": "A4:C1:38:00:00:2A", "name": "Late Sensor", "rssi": -60, "interval": "20ms"}"#)
            try await eventually("BlueZ knows the late sensor") {
                await central.rememberedAdvertisementData(late).localName == "Late Sensor"
            }
            try await peer.send(report(late))
            try await eventually("the late sensor's report with its name") {
                names.withLock { $0[late]?.last } == "Late Sensor"
            }
            await central.stopScan(token)
            await radio.close()
            await central.close()
        }
    }

    @Test(
        "a monitor a killed process left in the kernel is removed by the next one, through the record in the state directory"
    )
    func staleMonitorRemoved() async throws {
        try await CentralHarness.run(Scenarios.sensors(), managementSocket: true) { harness in
            let socket = try #require(harness.managementSocket)
            let directory = try TemporaryDirectory.make(prefix: "monitor-record")
            let record = directory.appendingPathComponent("adv-monitor").path
            // A third client sees the monitors come and go, as any management socket does.
            let seen = Mutex<[ManagementEvent]>([])
            let observer = try await KernelRadio.open(.socket(path: socket), loop: harness.loop, deliver: { _ in }) {
                event in seen.withLock { $0.append(event) }
            }
            _ = try await observer.version()
            let first = try await KernelRadio.open(.socket(path: socket), loop: harness.loop) { _ in }
            // A record that is not a few lines (here 12 KB of them) is not used, and goes.
            try LocalFile.write(String(repeating: "0 5\n", count: 3_000), to: record)
            await first.keepMonitorRecord(at: record)
            #expect(await first.staleMonitorsRemoved == 0)
            #expect(!LocalFile.exists(record))
            try await first.holdPassiveScan(controller: 0)
            let handle = try #require(await first.monitorHandle)
            #expect(LocalFile.readText(record) == "0 \(handle)\n")
            // Killed: the socket closes without Remove Advertisement Monitor; the kernel keeps it.
            await first.close()
            let second = try await KernelRadio.open(.socket(path: socket), loop: harness.loop) { _ in }
            await second.keepMonitorRecord(at: record)
            #expect(await second.staleMonitorsRemoved == 1)
            try await eventually("the stale monitor removed") {
                seen.withLock {
                    $0.contains {
                        if case .advertisementMonitorRemoved(0, handle) = $0 { return true }
                        return false
                    }
                }
            }
            #expect(!LocalFile.exists(record), "nothing held, nothing recorded")
            // The next monitor is recorded again, and its release clears the record.
            try await second.holdPassiveScan(controller: 0)
            let next = try #require(await second.monitorHandle)
            #expect(LocalFile.readText(record) == "0 \(next)\n")
            await second.releasePassiveScan()
            #expect(!LocalFile.exists(record))
            await second.close()
            await observer.close()
        }
    }
}
