import BlueZSimulator
import DBus
import Foundation
import Testing

@Suite("Simulator fault knobs, control interface, Acquire*, crash and restart")
struct SimulatorFaultTests {
    static func scenario(faults: String = "", events: String = "", connectable: Bool = true) -> String {
        """
        {
          \(TestScenarios.timing),
          "devices": [
            {"address": "A4:C1:38:00:00:01", "name": "Flaky", "interval": "20ms", "service_uuids": ["180F"], "connectable": \(connectable),
             \(faults.isEmpty ? "" : "\"faults\": {\(faults)},")
             "gatt": [{"uuid": "180F", "characteristics": [
               {"uuid": "2A19", "flags": ["read", "notify"], "value": {"hex": "50"}},
               {"uuid": "ff01", "flags": ["write-without-response"]}]}]}
          ],
          "events": [\(events)]
        }
        """
    }
    static let device = TestScenarios.battery
    static let level = device + "/service0006/char0007".replacingOccurrences(of: "0006/char0007", with: "000a/char000b")
    static let writer = device + "/service000a/char000e"

    func found(_ client: Client) async throws -> SignalLog {
        let log = try await client.signals()
        try await client.call("/org/bluez/hci0", Client.adapter, "StartDiscovery")
        try await log.wait(for: "device found") { $0.isInterfacesAdded(Self.device) }
        return log
    }

    func connectResolved(_ client: Client) async throws {
        try await client.call(Self.device, Client.device, "Connect")
        try await eventually("ServicesResolved") {
            try await client.get(Self.device, Client.device, "ServicesResolved")?.bool == true
        }
    }

    @Test(
        "connect_failures: the first N Connect() calls fail with le-connection-abort-by-local; concurrent Connect is refused"
    )
    func connectFailures() async throws {
        // The delay is what keeps the first Connect pending while the second one arrives: long
        // enough for that on a loaded machine, where a round trip can take a few hundred ms (1 s
        // was not: the second call came after the first had failed while a soak ran beside it).
        try await SimulatorHarness.run(Self.scenario(faults: #""connect_failures": 2, "connect_delay": "3s""#)) {
            harness in
            let client = try await harness.client()
            _ = try await found(client)
            let first = Task { try await client.call(Self.device, Client.device, "Connect") }
            try await eventually("the first Connect pending") {
                await harness.simulator.currentCounters.connectCalls == 1
            }
            await #expect { try await client.call(Self.device, Client.device, "Connect") } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.Failed", "Operation already in progress")
            }
            await #expect { _ = try await first.value } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.Failed", "le-connection-abort-by-local")
            }
            await #expect(throws: DBusError.self) { try await client.call(Self.device, Client.device, "Connect") }
            let started = Date()
            try await client.call(Self.device, Client.device, "Connect")
            #expect(Date().timeIntervalSince(started) >= 2.99, "connect_delay")
            #expect(try await client.control("Counters").first?.dictionary?["ConnectFailures"]?.int == 2)
        }
    }

    @Test(
        "unreachable / non-connectable: Connect fails after the create-connection timeout; Disconnect cancels a pending Connect"
    )
    func unreachable() async throws {
        // The timeout is what keeps the second Connect pending until Disconnect arrives: long enough
        // for that on a loaded machine (2 s was not, once, in a make test at full load).
        try await SimulatorHarness.run(Self.scenario(faults: #""unreachable": true, "connect_timeout": "6s""#)) {
            harness in
            let client = try await harness.client()
            _ = try await found(client)
            let started = Date()
            await #expect { try await client.call(Self.device, Client.device, "Connect") } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.Failed", "le-connection-abort-by-local")
            }
            #expect(Date().timeIntervalSince(started) >= 5.99)
            let pending = Task { try await client.call(Self.device, Client.device, "Connect") }
            try await eventually("the second Connect pending") {
                await harness.simulator.currentCounters.connectCalls == 2
            }
            try await client.call(Self.device, Client.device, "Disconnect")
            await #expect { _ = try await pending.value } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.Failed", "br-connection-canceled")
            }
        }
    }

    @Test("link_drop_after: the peer drops the link; one {ServicesResolved:false, Connected:false} signal")
    func linkDrop() async throws {
        try await SimulatorHarness.run(Self.scenario(faults: #""link_drop_after": "100ms""#)) { harness in
            let client = try await harness.client()
            let log = try await found(client)
            try await client.call(Self.device, Client.device, "Connect")
            let down = try await log.wait(for: "link dropped") {
                $0.isPropertiesChanged(Self.device, Client.device) && $0.changed["Connected"]?.bool == false
            }
            #expect(down.changed.keys.sorted() == ["Connected", "ServicesResolved"])
        }
    }

    @Test("power events: off drops sessions and links (Discovering=false, Connected=false, Powered=false), on again")
    func powerEvents() async throws {
        // Late enough that discovery and Connect are done before the adapter goes off, even when the
        // whole suite shares two busy cores (3 s was not: the power-off came before Connect).
        let events =
            #"{"at": "10s", "adapter": "hci0", "powered": false}, {"at": "10500ms", "adapter": "hci0", "powered": true}"#
        try await SimulatorHarness.run(Self.scenario(events: events)) { harness in
            let client = try await harness.client()
            let log = try await found(client)
            try await client.call(Self.device, Client.device, "Connect")
            try await log.wait(for: "Powered=false") {
                $0.isPropertiesChanged("/org/bluez/hci0", Client.adapter) && $0.changed["Powered"]?.bool == false
            }
            #expect(
                log.all.contains {
                    $0.isPropertiesChanged("/org/bluez/hci0", Client.adapter)
                        && $0.changed["Discovering"]?.bool == false
                })
            #expect(
                log.all.contains {
                    $0.isPropertiesChanged(Self.device, Client.device) && $0.changed["Connected"]?.bool == false
                })
            try await log.wait(for: "Powered=true") {
                $0.isPropertiesChanged("/org/bluez/hci0", Client.adapter) && $0.changed["Powered"]?.bool == true
            }
            #expect(
                try await client.get("/org/bluez/hci0", Client.adapter, "Discovering")?.bool == false,
                "sessions were dropped")
            try await client.call("/org/bluez/hci0", Client.adapter, "StartDiscovery")
        }
    }

    @Test(
        "crash (control Crash): org.bluez loses its owner with no InterfacesRemoved; restart brings a fresh tree under a new unique name"
    )
    func crashAndRestart() async throws {
        try await SimulatorHarness.run(Self.scenario()) { harness in
            let client = try await harness.client()
            let owners = try await client.connection.nameOwnerChanges(of: "org.bluez")
            var iterator = owners.makeAsyncIterator()
            let log = try await found(client)
            let first = try await client.connection.nameOwner("org.bluez")
            try await client.control("Crash", [.double(0.2)])
            let gone = await iterator.next()
            #expect(gone?.newOwner == nil && gone?.oldOwner == first)
            #expect(!log.all.contains { $0.member == "InterfacesRemoved" })
            let back = await iterator.next()
            #expect(back?.newOwner != nil && back?.newOwner != first)
            let objects = try await client.managedObjects()
            #expect(objects["/org/bluez/hci0"] != nil && objects[Self.device] == nil, "fresh tree")
        }
    }

    @Test("control interface: add and remove devices, notification burst as fast as possible, counters")
    func control() async throws {
        try await SimulatorHarness.run(Self.scenario()) { harness in
            let client = try await harness.client()
            let log = try await found(client)
            let added = try await client.control(
                "AddDevice",
                [
                    .string(
                        #"{"address": "A4:C1:38:00:00:09", "name": "Late", "interval": "20ms", "service_uuids": ["180F"]}"#
                    )
                ])
            #expect(added.first?.objectPath?.rawValue == "/org/bluez/hci0/dev_A4_C1_38_00_00_09")
            try await log.wait(for: "added device found") {
                $0.isInterfacesAdded("/org/bluez/hci0/dev_A4_C1_38_00_00_09")
            }
            try await client.control("RemoveDevice", [.string("A4:C1:38:00:00:09")])
            try await log.wait(for: "removed") {
                $0.member == "InterfacesRemoved"
                    && $0.arguments.first?.objectPath?.rawValue == "/org/bluez/hci0/dev_A4_C1_38_00_00_09"
            }
            await #expect {
                try await client.control(
                    "Burst", [.string("A4:C1:38:00:00:01"), .string("2A19"), .uint32(10), .double(0)])
            } throws: {
                ($0 as? DBusError)?.name.rawValue == "io.gattway.Simulator1.Error.NotConnected"
            }
            try await connectResolved(client)
            try await client.call(Self.level, Client.characteristic, "StartNotify")
            try await client.control(
                "Burst", [.string("A4:C1:38:00:00:01"), .string("2A19"), .uint32(1000), .double(0)])
            try await eventually("1000 notifications") {
                log.all.filter {
                    $0.isPropertiesChanged(Self.level, Client.characteristic) && $0.changed["Value"] != nil
                }.count >= 1000
            }
            let values = log.all.filter {
                $0.isPropertiesChanged(Self.level, Client.characteristic) && $0.changed["Value"] != nil
            }.map { $0.changed["Value"]?.bytes ?? [] }
            #expect(values.first == [0, 0, 0, 0] && values.last == [0xE7, 3, 0, 0], "u32 LE sequence, in order")
            let counters = try await client.control("Counters").first?.dictionary ?? [:]
            #expect(counters["Notifications"]?.int == 1000 && counters["LastBurstCount"]?.int == 1000)
            try await client.control("Disconnect", [.string("A4:C1:38:00:00:01")])
            try await log.wait(for: "peer disconnect") {
                $0.isPropertiesChanged(Self.device, Client.device) && $0.changed["Connected"]?.bool == false
            }
        }
    }

    @Test("AcquireNotify and AcquireWrite: SOCK_SEQPACKET datagrams, *Acquired flags, exclusivity, HUP on disconnect")
    func acquire() async throws {
        try await SimulatorHarness.run(Self.scenario()) { harness in
            let client = try await harness.client()
            _ = try await found(client)
            try await connectResolved(client)
            let reply = try await client.call(Self.level, Client.characteristic, "AcquireNotify", [Client.emptyOptions])
            guard let fd = reply.first?.unixFD else { Issue.record("no fd in \(reply)"); return }
            #expect(reply.last?.uint16 == 517)
            try await eventually("NotifyAcquired") {
                try await client.get(Self.level, Client.characteristic, "NotifyAcquired")?.bool == true
            }
            await #expect { try await client.call(Self.level, Client.characteristic, "StartNotify") } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.NotPermitted", "Notify acquired")
            }
            try await client.control("Notify", [.string("A4:C1:38:00:00:01"), .string("2A19"), .bytes([7, 8])])
            var buffer = [UInt8](repeating: 0, count: 64)
            let count = buffer.withUnsafeMutableBytes { read(fd.fileDescriptor, $0.baseAddress, $0.count) }
            #expect(Array(buffer.prefix(max(0, count))) == [7, 8])
            #expect(try await client.get(Self.level, Client.characteristic, "Value")?.bytes == [], "Value not updated")

            let write = try await client.call(Self.writer, Client.characteristic, "AcquireWrite", [Client.emptyOptions])
            guard let writeFD = write.first?.unixFD else { Issue.record("no write fd"); return }
            _ = [UInt8]([9, 9, 9]).withUnsafeBytes { send(writeFD.fileDescriptor, $0.baseAddress, $0.count, 0) }
            try await eventually("datagram recorded as a write command") {
                try await client.control("RecordedWrites").first?.array?.first?["Value"]?.bytes == [9, 9, 9]
            }
            await #expect {
                try await client.call(
                    Self.writer, Client.characteristic, "WriteValue", [.bytes([1]), Client.emptyOptions])
            } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.NotPermitted", "Write acquired")
            }
            try await client.control("Disconnect", [.string("A4:C1:38:00:00:01")])
            try await eventually("HUP/EOF on the notify fd") {
                var byte: UInt8 = 0
                return read(fd.fileDescriptor, &byte, 1) == 0
            }
        }
    }
}
