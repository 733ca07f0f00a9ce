import BlueZ
import BlueZSimulator
import Bluetooth
import DBus
import EventLoop
import Foundation
import Synchronization
import TestSupport
import Testing

/// Behaviour of the central that Core Bluetooth users rely on and that had no test of its own:
/// the state when the bus denies BlueZ, ending notifications, discovery of absent UUIDs, a read
/// of a characteristic without `read`, the write length while the MTU is unknown.
@Suite("CentralManager: unauthorized, stop notifying, absent UUIDs, no read, unknown MTU")
struct CentralGapTests {
    static let batteryCharacteristic: DBusObjectPath = "/org/bluez/hci0/dev_A4_C1_38_00_00_01/service000a/char000b"

    @Test("a bus policy that denies org.bluez: the central's state is .unauthorized, and it says so")
    func unauthorized() async throws {
        let daemon = try await DBusDaemon(
            extraConfig: #"<policy context="default"><deny send_destination="org.bluez"/></policy>"#)
        defer { daemon.stop() }
        let loop = EventLoop(name: "unauthorized-test")
        defer { loop.shutdown() }
        let simulator = try await BlueZSimulator.start(
            scenario: try Scenario.parse(Data(Scenarios.sensors().utf8)), bus: .address(daemon.address), on: loop)
        let central = try await CentralManager.start(
            options: CentralOptions(adapter: .name("hci0")), bus: .address(daemon.address), on: loop)
        let state = try await within(10, "the state to settle") {
            for await state in await central.stateUpdates() where state != .unknown { return state }
            return CentralState.unknown
        }
        #expect(state == .unauthorized)
        await #expect { try await central.waitUntilPoweredOn(timeout: .seconds(1)) } throws: { error in
            "\(error)".contains("unauthorized")
        }
        await central.close()
        await simulator.stop()
    }

    @Test(
        "the last consumer of a notification subscription ends: BlueZ stops notifying and no value is delivered after")
    func stopNotifying() async throws {
        for acquire in [true, false] {
            try await CentralHarness.run(Scenarios.sensors(notifyEvery: "1h")) { harness in
                let central = try await harness.central { $0.preferAcquireNotify = acquire }
                let client = try await harness.client()
                let (_, chars) = try await central.connectBattery(autoReconnect: false)
                let level = try #require(chars[BluetoothUUID(0x2A19)])
                @Sendable func notifying() async throws -> Bool {
                    let property = acquire ? "NotifyAcquired" : "Notifying"
                    let reply = try await client.call(
                        destination: "org.bluez", path: Self.batteryCharacteristic,
                        interface: "org.freedesktop.DBus.Properties", method: "Get",
                        arguments: [.string("org.bluez.GattCharacteristic1"), .string(property)])
                    return reply.first?.bool == true
                }
                let first = try await central.notifications(for: level)
                let second = try await central.notifications(for: level)
                let counted = Counter()
                let firstConsumer = Task { for try await _ in first { counted.add() } }
                let secondConsumer = Task { for try await _ in second { counted.add() } }
                try await harness.sim.notify(address: "A4:C1:38:00:00:01", uuid: "2A19", [50])
                try await eventually("both consumers got the value") { counted.value == 2 }
                #expect(try await notifying())
                firstConsumer.cancel()
                _ = await firstConsumer.result
                #expect(try await notifying(), "one consumer is left (acquire: \(acquire))")
                secondConsumer.cancel()
                _ = await secondConsumer.result
                try await eventually("BlueZ to stop notifying (acquire: \(acquire))") { try await !notifying() }
                let simulator = try harness.sim
                let before = await simulator.currentCounters.notifications
                // The device has no subscriber now: the simulator refuses to notify (or sends nothing).
                try? await simulator.notify(address: "A4:C1:38:00:00:01", uuid: "2A19", [49])
                try await Task.sleep(for: .milliseconds(300))
                #expect(counted.value == 2, "a value arrived after the last consumer ended")
                #expect(await simulator.currentCounters.notifications == before, "the device still notifies")
                await central.close()
            }
        }
    }

    @Test("discovering services and characteristics by UUIDs the device does not have gives empty lists")
    func absentUUIDs() async throws {
        try await CentralHarness.run(Scenarios.sensors()) { harness in
            let central = try await harness.central()
            let (peripheral, _) = try await central.connectBattery(autoReconnect: false)
            #expect(try await central.discoverServices([BluetoothUUID(0xABCD)], for: peripheral).isEmpty)
            let battery = try #require(
                try await central.discoverServices([BluetoothUUID(0x180F)], for: peripheral).first)
            #expect(try await central.discoverCharacteristics([BluetoothUUID(0xABCD)], for: battery).isEmpty)
            #expect(try await central.discoverCharacteristics([BluetoothUUID(0x2A19)], for: battery).count == 1)
            await central.close()
        }
    }

    @Test(
        "reading a characteristic without the read property: the peer's Read Not Permitted comes back as notPermitted with ATT 0x02 and BlueZ's words"
    )
    func readWithoutRead() async throws {
        try await CentralHarness.run(Scenarios.sensors()) { harness in
            let central = try await harness.central()
            let (_, chars) = try await central.connectBattery(autoReconnect: false)
            let writer = try #require(chars[BluetoothUUID(0xFF01)])
            #expect(!writer.properties.contains(.read))
            await #expect { _ = try await central.readValue(for: writer) } throws: { error in
                let error = error as? CentralError
                return error?.code == .notPermitted && error?.attError == 0x02
                    && error?.description.contains("ReadValue") == true
                    && error?.description.contains("Read not permitted") == true
            }
            await central.close()
        }
    }

    @Test(
        "while the MTU is unknown a write without response carries at most 20 bytes; a longer one is refused before it is sent"
    )
    func unknownMTU() async throws {
        // bluetoothd before 5.62 has no MTU property: the client does not know the MTU.
        let scenario = Scenarios.sensors().replacingOccurrences(
            of: #""gatt_latency": 0"#, with: #""gatt_latency": 0, "mtu_property": false"#)
        #expect(scenario.contains("mtu_property"))
        try await CentralHarness.run(scenario) { harness in
            let central = try await harness.central()
            let (_, chars) = try await central.connectBattery(autoReconnect: false)
            let writer = try #require(chars[BluetoothUUID(0xFF01)])
            #expect(await central.maximumWriteValueLength(for: writer, type: .withoutResponse) == 20)
            #expect(await central.maximumWriteValueLength(for: writer, type: .withResponse) == 512)
            let simulator = try harness.sim
            let before = await simulator.recordedWrites.count
            await #expect {
                try await central.writeValue(Array(repeating: 1, count: 21), for: writer, type: .withoutResponse)
            } throws: { ($0 as? CentralError)?.code == .invalidValueLength }
            #expect(await simulator.recordedWrites.count == before)
            // 20 bytes go through.
            try await central.writeValue(Array(repeating: 1, count: 20), for: writer, type: .withoutResponse)
            try await eventually("the 20-byte write to arrive") { await simulator.recordedWrites.count == before + 1 }
            await central.close()
        }
    }
}

extension CentralGapTests {
    @Test("writes without response started one after the other reach the device in that order (a bulk transfer)")
    func writesKeepTheirOrder() async throws {
        try await CentralHarness.run(Scenarios.sensors()) { harness in
            let central = try await harness.central()
            let (_, chars) = try await central.connectBattery(autoReconnect: false)
            let writer = try #require(chars[BluetoothUUID(0xFF01)])
            let simulator = try harness.sim
            let before = await simulator.recordedWrites.count
            // As the proxy starts them (the gateway's jobs): each its own task on the loop, while
            // the earlier ones still run (an operation that arrived as the device passed from one
            // to the next used to get in before those waiting).
            let executor = harness.loop.taskExecutor
            await withTaskGroup(of: Void.self) { group in
                for index in 0..<200 {
                    group.addTask(executorPreference: executor) {
                        try? await central.writeValue([UInt8(index)], for: writer, type: .withoutResponse)
                    }
                    if index % 7 == 0 { await Task.yield() }
                }
            }
            try await eventually("200 writes") { await simulator.recordedWrites.count == before + 200 }
            let values = await simulator.recordedWrites.dropFirst(before).map { Int($0.value[0]) }
            #expect(values == Array(0..<200))
            await central.close()
        }
    }

    @Test(
        "a device BlueZ connected before: after a reconnection the central has BlueZ's MTU, which bluetoothd sets without a signal"
    )
    func reconnectionMTU() async throws {
        try await CentralHarness.run(Scenarios.sensors()) { harness in
            let client = try await harness.client()
            @Sendable func bluezMTU() async -> Int? {
                let reply = try? await client.call(
                    destination: "org.bluez", path: Self.batteryCharacteristic,
                    interface: "org.freedesktop.DBus.Properties", method: "Get",
                    arguments: [.string("org.bluez.GattCharacteristic1"), .string("MTU")])
                return reply?.first?.int
            }
            // A first central connects the battery sensor: BlueZ exports its GATT objects (with the
            // MTU, the link being up) and keeps them after the disconnect, without MTU.
            let first = try await harness.central()
            let (peripheral, _) = try await first.connectBattery(autoReconnect: false)
            try await first.disconnect(peripheral)
            await first.close()
            #expect(await bluezMTU() == nil)
            // A central started now finds the cached objects without MTU; on the connection
            // bluetoothd sets it silently. The write length follows BlueZ's MTU all the same.
            let central = try await harness.central()
            let (_, chars) = try await central.connectBattery(autoReconnect: false)
            let writer = try #require(chars[BluetoothUUID(0xFF01)])
            let mtu = try #require(await bluezMTU())
            #expect(mtu == 517)
            #expect(await central.maximumWriteValueLength(for: writer, type: .withoutResponse) == mtu - 3)
            await central.close()
            await client.close()
        }
    }
}

/// A thread-safe count for consumers on other tasks.
private final class Counter: Sendable {
    private let count = Mutex(0)
    func add() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}
