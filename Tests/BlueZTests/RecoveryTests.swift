import BlueZ
import BlueZSimulator
import Bluetooth
import DBus
import Foundation
import TestSupport
import Testing

@Suite("CentralManager recovery and state restoration")
struct RecoveryTests {
    @Test(
        "a link drop is reported as peripheralDisconnected; the manager reconnects and notifications resume",
        arguments: [false, true])
    func linkDrop(acquire: Bool) async throws {
        try await CentralHarness.run(Scenarios.sensors()) { harness in
            let central = try await harness.central { $0.preferAcquireNotify = acquire }
            let events = await central.connectionEvents()
            let (peripheral, chars) = try await central.connectBattery()
            let values = try await central.notifications(for: try #require(chars[BluetoothUUID(0x2A19)]))
            _ = try await collect(values, count: 2, "notifications before the drop")
            try await harness.sim.disconnectPeer(address: "A4:C1:38:00:00:01")
            let dropped = try await first(events, "disconnected") {
                if case .disconnected = $0 { return true } else { return false }
            }
            guard case .disconnected(_, let error) = dropped else { return }
            #expect(error?.code == .peripheralDisconnected)
            _ = try await first(events, "reconnected") { $0 == .connected(peripheral) }
            _ = try await collect(values, count: 3, "notifications after reconnecting")
            await central.close()
        }
    }

    @Test("link_drop_after: repeated drops are each followed by a reconnection")
    func repeatedDrops() async throws {
        try await CentralHarness.run(Scenarios.sensors(batteryFaults: #""link_drop_after": "150ms""#)) { harness in
            let central = try await harness.central()
            let events = await central.connectionEvents()
            let peripheral = try await central.findBattery()
            try await central.connect(peripheral, timeout: .seconds(30))
            let count = try await within(defaultWait, "three reconnections") {
                var connects = 0
                for await event in events where event == .connected(peripheral) {
                    connects += 1
                    if connects == 4 { return connects }
                }
                return connects
            }
            #expect(count == 4)
            await central.close()
        }
    }

    @Test(
        "an adapter power cycle: poweredOff, connections dropped; on power-on discovery, connection and notifications come back"
    )
    func powerCycle() async throws {
        try await CentralHarness.run(Scenarios.sensors()) { harness in
            let central = try await harness.central()
            let events = await central.connectionEvents()
            let (peripheral, chars) = try await central.connectBattery()
            let scan = try await central.scan(ScanOptions(services: [BluetoothUUID(0x180D)], allowDuplicates: true))
            let values = try await central.notifications(for: try #require(chars[BluetoothUUID(0x2A19)]))
            _ = try await collect(values, count: 2, "notifications before power-off")
            _ = try await first(scan, "scan results before power-off")
            try await harness.sim.setPowered(adapter: "hci0", false)
            let dropped = try await first(events, "disconnected") {
                if case .disconnected = $0 { return true } else { return false }
            }
            if case .disconnected(_, let error) = dropped { #expect(error?.code == .poweredOff) }
            #expect(await central.state == .poweredOff)
            try await harness.sim.setPowered(adapter: "hci0", true)
            _ = try await first(events, "reconnected after power-on") { $0 == .connected(peripheral) }
            _ = try await collect(values, count: 3, "notifications after power-on")
            _ = try await first(scan, "scan results after power-on")
            #expect(await central.isScanning)
            await central.close()
        }
    }

    @Test(
        "bluetoothd exits and restarts: resetting, then objects re-read, discovery re-armed, connection and subscription restored (on the kernel's path too: under the device's match rule, values as Value signals)",
        arguments: [false, true])
    func daemonRestart(kernel: Bool) async throws {
        try await CentralHarness.run(Scenarios.sensors(), managementSocket: kernel) { harness in
            let (central, radio) =
                kernel
                ? try await MatchRuleTests.kernelCentral(harness) { $0.preferAcquireNotify = false }
                : (try await harness.central(), nil)
            let states = await central.stateUpdates()
            let events = await central.connectionEvents()
            let (peripheral, chars) = try await central.connectBattery()
            let scan = try await central.scan(ScanOptions(services: [BluetoothUUID(0x180F)], allowDuplicates: true))
            let values = try await central.notifications(for: try #require(chars[BluetoothUUID(0x2A19)]))
            _ = try await collect(values, count: 2, "notifications before the crash")
            try await harness.sim.crash(restartAfter: 0.3)
            _ = try await first(states, "resetting") { $0 == .resetting }
            let dropped = try await first(events, "disconnected") {
                if case .disconnected = $0 { return true } else { return false }
            }
            if case .disconnected(_, let error) = dropped { #expect(error?.code == .bluezUnavailable) }
            _ = try await first(states, "poweredOn after the restart") { $0 == .poweredOn }
            _ = try await first(scan, "the battery sensor discovered again") {
                $0.peripheral.address == Scenarios.battery
            }
            _ = try await first(events, "reconnected") { $0 == .connected(peripheral) }
            _ = try await collect(values, count: 3, "notifications after the restart")
            if kernel {
                try await MatchRuleTests.expectBusRules(
                    harness, [MatchRuleTests.objectManager, MatchRuleTests.adapters, MatchRuleTests.battery],
                    "the device's rule after the restart")
            }
            await radio?.close()
            await central.close()
        }
    }

    @Test("a connection that exists in BlueZ at start is adopted")
    func adoption() async throws {
        try await CentralHarness.run(Scenarios.sensors()) { harness in
            let first = try await harness.central()
            let (peripheral, _) = try await first.connectBattery(autoReconnect: false)
            await first.close()  // BlueZ keeps the link (bluez#89)
            let second = try await harness.central()
            #expect(await second.connectedPeripherals().map(\.address) == [peripheral.address])
            #expect(await second.connectedPeripherals(withServices: [BluetoothUUID(0x180D)]).isEmpty)
            let events = await second.connectionEvents()
            _ = try await TestSupport.first(events, "adopted connection reported") { $0 == .connected(peripheral) }
            let services = try await second.discoverServices([BluetoothUUID(0x180F)], for: peripheral)
            let service = try #require(services.first)
            let level = try #require(try await second.discoverCharacteristics(for: service).first)
            #expect(try await second.readValue(for: level).count == 1)
            await second.close()
        }
    }

    @Test("the state file keeps wanted connections and subscriptions across a restart of the process")
    func stateFile() async throws {
        let directory = try TemporaryDirectory.make(prefix: "central-state")
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("central.json").path
        try await CentralHarness.run(Scenarios.sensors()) { harness in
            let before = try await harness.central { $0.stateFilePath = path }
            let (peripheral, chars) = try await before.connectBattery()
            let level = try #require(chars[BluetoothUUID(0x2A19)])
            let values = try await before.notifications(for: level)
            _ = try await first(values, "a notification")
            let saved = try String(contentsOfFile: path, encoding: .utf8)
            #expect(saved.contains(#""address":"A4:C1:38:00:00:01""#) && saved.contains(#""connect":true"#))
            #expect(saved.contains(#""characteristic":"2A19""#))
            await before.close()
            try await harness.sim.disconnectPeer(address: "A4:C1:38:00:00:01")  // the link went down meanwhile

            let after = try await harness.central { $0.stateFilePath = path }
            #expect(await after.restoredSubscriptions == [level])
            #expect(await after.restoredPeripherals.map(\.address) == [peripheral.address])
            let events = await after.connectionEvents()
            _ = try await first(events, "reconnected from the state file") { $0 == .connected(peripheral) }
            let restored = try await after.notifications(for: #require(await after.restoredSubscriptions.first))
            _ = try await collect(restored, count: 2, "notifications after the restart")
            try await after.disconnect(peripheral)
            let cleared = try String(contentsOfFile: path, encoding: .utf8)
            #expect(!cleared.contains("A4:C1:38:00:00:01"))
            await after.close()
        }
    }

    @Test(
        "restored state the app does not take up: keepRestored(where:) forgets what it rejects at once, close() leaves out what was never taken up, and what the app subscribed to stays saved"
    )
    func restoredStateNotTakenUp() async throws {
        let directory = try TemporaryDirectory.make(prefix: "central-state")
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("central.json").path
        try """
        {"version":1,"devices":[
          {"address":"A4:C1:38:00:00:01","connect":false},{"address":"A4:C1:38:00:00:07","connect":false},
          {"address":"A4:C1:38:00:00:09","connect":false}],
         "subscriptions":[
          {"address":"A4:C1:38:00:00:01","service":"180F","characteristic":"2A19"},
          {"address":"A4:C1:38:00:00:07","service":"181A","characteristic":"2A6E"},
          {"address":"A4:C1:38:00:00:09","service":"180F","characteristic":"2A19"}]}
        """.write(toFile: path, atomically: true, encoding: .utf8)
        try await CentralHarness.run(Scenarios.sensors()) { harness in
            let central = try await harness.central { $0.stateFilePath = path }
            #expect(await central.restoredSubscriptions.count == 3)
            let unwanted = try #require(BluetoothAddress("A4:C1:38:00:00:07"))
            await central.keepRestored { $0.peripheral != unwanted }
            #expect(
                await central.restoredPeripherals.map(\.address.description) == [
                    "A4:C1:38:00:00:01", "A4:C1:38:00:00:09",
                ])
            let kept = try String(contentsOfFile: path, encoding: .utf8)
            #expect(!kept.contains("A4:C1:38:00:00:07") && kept.contains("A4:C1:38:00:00:09"), "\(kept)")

            // The app takes up the battery's subscription; 00:09 it never reaches.
            let (_, chars) = try await central.connectBattery(autoReconnect: false)
            let values = try await central.notifications(for: try #require(chars[BluetoothUUID(0x2A19)]))
            _ = try await first(values, "a notification")
            #expect(await central.restoredSubscriptions.map(\.peripheral.description) == ["A4:C1:38:00:00:09"])
            await central.close()
            let closed = try String(contentsOfFile: path, encoding: .utf8)
            #expect(closed.contains(#""address":"A4:C1:38:00:00:01""#), "what the app has stays: \(closed)")
            #expect(!closed.contains("A4:C1:38:00:00:09"), "never taken up: \(closed)")
        }
    }

    @Test(
        "a link without auto-reconnect and without a subscription is saved (connect false) and restored as a peripheral; keepStateForRestart() keeps the links up through the app's disconnect and close(); keepRestored(peripherals:) keeps a restored device the app will connect"
    )
    func linksKeptForRestart() async throws {
        let directory = try TemporaryDirectory.make(prefix: "central-state")
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("central.json").path
        try await CentralHarness.run(Scenarios.sensors()) { harness in
            let before = try await harness.central { $0.stateFilePath = path }
            let (peripheral, _) = try await before.connectBattery(autoReconnect: false)
            let saved = try String(contentsOfFile: path, encoding: .utf8)
            #expect(
                saved.contains(#"{"address":"A4:C1:38:00:00:01","#) && saved.contains(#""connect":false"#), "\(saved)")
            // A clean stop: the state for the next start first, then the links end.
            await before.keepStateForRestart()
            try await before.disconnect(peripheral)
            await before.close()
            let stopped = try String(contentsOfFile: path, encoding: .utf8)
            #expect(stopped == saved, "the disconnect and close() leave it: \(stopped)")

            let after = try await harness.central { $0.stateFilePath = path }
            #expect(await after.restoredPeripherals.map(\.address) == [peripheral.address])
            #expect(await after.restoredSubscriptions.isEmpty)
            await after.keepRestored(peripherals: { $0 == peripheral.address }) { _ in false }
            #expect(await after.restoredPeripherals.map(\.address) == [peripheral.address], "kept: the app connects it")
            let kept = try String(contentsOfFile: path, encoding: .utf8)
            #expect(kept.contains("A4:C1:38:00:00:01"), "still saved before its connect: \(kept)")
            await after.close()
            let closed = try String(contentsOfFile: path, encoding: .utf8)
            #expect(
                !closed.contains("A4:C1:38:00:00:01"),
                "a close() without it leaves out what was not taken up: \(closed)")
        }
    }
}

@Suite("CentralManager long-uptime hygiene")
struct HygieneTests {
    @Test("devices BlueZ removes are forgotten: 300 rotating random addresses leave the device count bounded")
    func rotatingAddresses() async throws {
        try await CentralHarness.run(Scenarios.sensors()) { harness in
            let simulator = try harness.sim
            let central = try await harness.central()
            let results = try await central.scan(ScanOptions(services: [BluetoothUUID(0xFEAA)], allowDuplicates: true))
            let seen = SeenAddresses()
            let reader = Task { for await result in results { await seen.add(result.peripheral.address) } }
            var maximum = 0
            for round in 0..<30 {
                var batch: [String] = []
                for index in 0..<10 {
                    let address = String(format: "5A:00:00:00:%02X:%02X", round, index)
                    batch.append(address)
                    _ = try await simulator.addDevice(
                        json:
                            #"{"address": "\#(address)", "address_type": "random", "interval": "10ms", "service_uuids": ["FEAA"]}"#
                    )
                }
                let expected = batch
                try await eventually("round \(round) seen") { await seen.contains(all: expected) }
                maximum = max(maximum, await central.knownDeviceCount)
                for address in batch { try await simulator.removeDevice(address: address) }
                try await eventually("round \(round) forgotten") { await central.knownDeviceCount <= 3 }
            }
            #expect(maximum <= 13)
            #expect(await central.trackedObjectCount < 40)
            reader.cancel()
            await central.close()
        }
    }
}

actor SeenAddresses {
    private var addresses: Set<BluetoothAddress> = []
    func add(_ address: BluetoothAddress) { addresses.insert(address) }
    func contains(all: [String]) -> Bool { all.allSatisfy { BluetoothAddress($0).map(addresses.contains) ?? false } }
}
