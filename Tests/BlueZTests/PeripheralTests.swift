import BlueZ
import BlueZSimulator
import Bluetooth
import DBus
import Foundation
import TestSupport
import Testing

@Suite("CentralManager connections and GATT")
struct PeripheralTests {
    @Test("connect, discover with UUID filters, read, write with and without response, descriptors, disconnect")
    func gattRoundTrip() async throws {
        try await CentralHarness.run(Scenarios.sensors()) { harness in
            let central = try await harness.central()
            let events = await central.connectionEvents()
            let peripheral = try await central.findBattery()
            let connected = try await central.connect(peripheral, timeout: .seconds(30), autoReconnect: false)
            #expect(connected.isConnected)
            _ = try await first(events, "connected event") { $0 == .connected(peripheral) }
            let services = try await central.discoverServices([BluetoothUUID(0x180F)], for: peripheral)
            #expect(services.map(\.uuid) == [BluetoothUUID(0x180F)])
            let all = try await central.discoverServices(for: peripheral)
            #expect(Set(all.map(\.uuid)) == [BluetoothUUID(0x1801), BluetoothUUID(0x180F), BluetoothUUID(0xFF00)])
            let battery = try #require(services.first)
            let level = try #require(
                try await central.discoverCharacteristics([BluetoothUUID(0x2A19)], for: battery).first)
            #expect(level.properties == [.read, .notify])
            #expect(try await central.readValue(for: level) == [94])
            let descriptors = try await central.discoverDescriptors(for: level)
            let userDescription = try #require(descriptors.first { $0.uuid == BluetoothUUID(0x2901) })
            #expect(try await central.readValue(for: userDescription) == Array("Level".utf8))
            #expect(userDescription.handle > level.handle)
            try await central.writeValue(Array("Lvl".utf8), for: userDescription)

            let custom = try #require(all.first { $0.uuid == BluetoothUUID(0xFF00) })
            let chars = Dictionary(
                uniqueKeysWithValues: try await central.discoverCharacteristics(for: custom).map { ($0.uuid, $0) })
            let writer = try #require(chars[BluetoothUUID(0xFF01)])
            let state = try #require(chars[BluetoothUUID(0xFF02)])
            try await central.writeValue([0x01, 0x02], for: writer, type: .withResponse)
            #expect(try await central.readValue(for: state) == [0x01, 0x02])
            try await central.writeValue([0x03], for: writer, type: .withoutResponse)
            let writes = try await harness.sim.recordedWrites
            #expect(writes.map(\.type) == ["descriptor", "request", "command"])
            #expect(writes.map(\.value) == [Array("Lvl".utf8), [0x01, 0x02], [0x03]])
            #expect(await central.maximumWriteValueLength(for: writer, type: .withoutResponse) == 514)
            #expect(await central.maximumWriteValueLength(for: writer, type: .withResponse) == 512)

            try await central.disconnect(peripheral)
            _ = try await first(events, "disconnected without error") { $0 == .disconnected(peripheral, nil) }
            await central.close()
        }
    }

    @Test("errors carry Core Bluetooth meanings with BlueZ's name and message")
    func gattErrors() async throws {
        try await CentralHarness.run(Scenarios.sensors()) { harness in
            let central = try await harness.central()
            let (peripheral, chars) = try await central.connectBattery(autoReconnect: false)
            let failing = try #require(chars[BluetoothUUID(0xFF03)])
            await #expect { _ = try await central.readValue(for: failing) } throws: {
                let error = $0 as? CentralError
                return error?.code == .failed && error?.bluezName == "org.bluez.Error.Failed"
                    && error?.message == "Operation failed with ATT error: 0x80" && error?.attError == 0x80
                    && error?.coreBluetoothError == CoreBluetoothErrorCode(domain: .att, code: 0x80)
            }
            let badLength = try #require(chars[BluetoothUUID(0xFF04)])
            await #expect { try await central.writeValue([1], for: badLength, type: .withResponse) } throws: {
                let error = $0 as? CentralError
                return error?.code == .invalidValueLength && error?.bluezName == "org.bluez.Error.InvalidArguments"
                    && error?.attError == 0x0D
                    && error?.coreBluetoothError == CoreBluetoothErrorCode(domain: .att, code: 13)
            }
            let level = try #require(chars[BluetoothUUID(0x2A19)])
            await #expect { try await central.writeValue([1], for: level, type: .withResponse) } throws: {
                let error = $0 as? CentralError
                return error?.code == .operationNotSupported && error?.attError == nil
                    && error?.coreBluetoothError == CoreBluetoothErrorCode(domain: .central, code: 13)
            }
            let writer = try #require(chars[BluetoothUUID(0xFF01)])
            await #expect {
                try await central.writeValue(Array(repeating: 0, count: 515), for: writer, type: .withoutResponse)
            } throws: {
                ($0 as? CentralError)?.code == .invalidValueLength
            }
            await #expect {
                try await central.writeValue(Array(repeating: 0, count: 513), for: writer, type: .withResponse)
            } throws: {
                ($0 as? CentralError)?.code == .invalidValueLength
            }
            // A long write with response (more than MTU - 3) goes through.
            try await central.writeValue(Array(repeating: 7, count: 600 - 100), for: writer, type: .withResponse)
            let readOnly = try #require(chars[BluetoothUUID(0xFF05)])
            await #expect { _ = try await central.notifications(for: readOnly) } throws: {
                ($0 as? CentralError)?.code == .operationNotSupported
            }
            try await central.disconnect(peripheral)
            await #expect { _ = try await central.readValue(for: level) } throws: {
                ($0 as? CentralError)?.code == .notConnected
            }
            await central.close()
        }
    }

    @Test("GATT operations on one device are serialised (no InProgress from concurrent calls)")
    func serialised() async throws {
        let scenario = Scenarios.sensors().replacingOccurrences(
            of: #""gatt_latency": 0"#, with: #""gatt_latency": "20ms""#)
        try await CentralHarness.run(scenario) { harness in
            let central = try await harness.central()
            let (_, chars) = try await central.connectBattery(autoReconnect: false)
            let writer = try #require(chars[BluetoothUUID(0xFF01)])
            let text = try #require(chars[BluetoothUUID(0xFF05)])
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<6 {
                    group.addTask { try await central.writeValue([UInt8(index)], for: writer, type: .withResponse) }
                    group.addTask {
                        let value = try await central.readValue(for: text)
                        #expect(value == Array("hello world".utf8))
                    }
                }
                try await group.waitForAll()
            }
            #expect(try await harness.sim.recordedWrites.count == 6)
            await central.close()
        }
    }

    @Test("connect times out with connectionTimeout when the device does not answer")
    func connectTimeout() async throws {
        try await CentralHarness.run(
            Scenarios.sensors(batteryFaults: #""unreachable": true, "connect_timeout": "20s""#)
        ) { harness in
            let central = try await harness.central()
            let peripheral = try await central.findBattery()
            let started = ContinuousClock.now
            await #expect {
                try await central.connect(peripheral, timeout: .milliseconds(300), autoReconnect: false)
            } throws: {
                ($0 as? CentralError)?.code == .connectionTimeout
            }
            #expect(ContinuousClock.now - started < .seconds(10), "our 300 ms timeout, not the device's 20 s")
            await central.close()
        }
    }

    @Test("connect failures: the error is connectionFailed with BlueZ's message; auto-reconnect then succeeds")
    func connectFailures() async throws {
        try await CentralHarness.run(Scenarios.sensors(batteryFaults: #""connect_failures": 2"#)) { harness in
            let central = try await harness.central()
            let events = await central.connectionEvents()
            let peripheral = try await central.findBattery()
            await #expect { try await central.connect(peripheral, timeout: .seconds(30)) } throws: {
                let error = $0 as? CentralError
                return error?.code == .connectionFailed && error?.message == "le-connection-abort-by-local"
                    && error?.bluezName == "org.bluez.Error.Failed"
            }
            _ = try await first(events, "connected by auto-reconnect") { $0 == .connected(peripheral) }
            #expect(try await harness.sim.currentCounters.connectFailures == 2)
            await central.close()
        }
    }

    @Test("notifications via StartNotify; our own read is not delivered as a notification")
    func startNotify() async throws {
        try await CentralHarness.run(Scenarios.sensors()) { harness in
            let central = try await harness.central { $0.preferAcquireNotify = false }
            let (_, chars) = try await central.connectBattery(autoReconnect: false)
            let level = try #require(chars[BluetoothUUID(0x2A19)])
            let values = try await central.notifications(for: level)
            let received = try await collect(values, count: 3, "three notifications")
            #expect(received[0][0] > received[2][0], "the counter counts down")

            let state = try #require(chars[BluetoothUUID(0xFF02)])
            let stateValues = try await central.notifications(for: state)
            try await harness.sim.setValue(address: "A4:C1:38:00:00:01", uuid: "ff02", [0x55])
            #expect(try await central.readValue(for: state) == [0x55])
            try await harness.sim.notify(address: "A4:C1:38:00:00:01", uuid: "ff02", [0x66])
            let next = try await first(stateValues, "the notification after the read")
            #expect(next == [0x66])
            await central.close()
        }
    }

    @Test("a simulator burst at an infinite rate (a D-Bus double) sends everything at once instead of trapping")
    func infiniteBurstRate() async throws {
        try await CentralHarness.run(Scenarios.sensors(notifyEvery: "1h")) { harness in
            let central = try await harness.central()
            let (_, chars) = try await central.connectBattery(autoReconnect: false)
            let level = try #require(chars[BluetoothUUID(0x2A19)])
            let values = try await central.notifications(for: level, bufferingNewest: 1_000)
            try await harness.sim.burst(address: "A4:C1:38:00:00:01", uuid: "2A19", count: 50, rate: .infinity)
            let received = try await collect(values, count: 50, within: 20, "50 notifications")
            #expect(received.count == 50)
            await central.close()
        }
    }

    @Test("notifications via AcquireNotify when BlueZ offers it; a burst arrives complete and in order")
    func acquireNotify() async throws {
        try await CentralHarness.run(Scenarios.sensors(notifyEvery: "1h")) { harness in
            let central = try await harness.central()
            let client = try await harness.client()
            let (_, chars) = try await central.connectBattery(autoReconnect: false)
            let level = try #require(chars[BluetoothUUID(0x2A19)])
            let values = try await central.notifications(for: level, bufferingNewest: 10_000)
            let acquired = try await client.call(
                destination: "org.bluez", path: "/org/bluez/hci0/dev_A4_C1_38_00_00_01/service000a/char000b",
                interface: "org.freedesktop.DBus.Properties", method: "Get",
                arguments: [.string("org.bluez.GattCharacteristic1"), .string("NotifyAcquired")])
            #expect(acquired.first?.bool == true)
            try await harness.sim.burst(address: "A4:C1:38:00:00:01", uuid: "2A19", count: 500, rate: 0)
            let received = try await collect(values, count: 500, within: 20, "500 notifications")
            let sequence = received.map {
                UInt32($0[0]) | UInt32($0[1]) << 8 | UInt32($0[2]) << 16 | UInt32($0[3]) << 24
            }
            #expect(sequence == Array(0..<500))
            await client.close()
            await central.close()
        }
    }
}
