import BlueZ
import BlueZSimulator
import Bluetooth
import DBus
import Foundation
import TestSupport
import Testing

@Suite("CentralManager state")
struct CentralStateTests {
    @Test(
        "poweredOn with an adapter; an adapter power cycle is seen as poweredOff and poweredOn; operations fail clearly when off"
    )
    func powerCycle() async throws {
        try await CentralHarness.run(Scenarios.sensors()) { harness in
            let central = try await harness.central()
            #expect(await central.state == .poweredOn)
            #expect(await central.adapterAddress == BluetoothAddress("00:AA:01:00:00:00"))
            let states = await central.stateUpdates()
            try await harness.sim.setPowered(adapter: "hci0", false)
            _ = try await first(states, "poweredOff") { $0 == .poweredOff }
            await #expect { _ = try await central.scan() } throws: { error in
                let error = error as? CentralError
                return error?.code == .poweredOff && error?.description.contains("powered off") == true
            }
            await #expect { try await central.connect(Peripheral(address: Scenarios.battery)) } throws: {
                ($0 as? CentralError)?.code == .poweredOff
            }
            try await harness.sim.setPowered(adapter: "hci0", true)
            _ = try await first(states, "poweredOn again") { $0 == .poweredOn }
            await central.close()
        }
    }

    @Test("unsupported while org.bluez has no owner; poweredOn when bluetoothd appears")
    func bluezAppears() async throws {
        try await CentralHarness.run(nil) { harness in
            let central = try await harness.central()
            #expect(await central.state == .unsupported)
            await #expect { _ = try await central.scan() } throws: { ($0 as? CentralError)?.code == .bluezUnavailable }
            let states = await central.stateUpdates()
            let simulator = try await BlueZSimulator.start(
                scenario: try Scenario.parse(Data(Scenarios.sensors().utf8)), bus: harness.bus, on: harness.loop)
            _ = try await first(states, "poweredOn after bluetoothd started") { $0 == .poweredOn }
            await central.close()
            await simulator.stop()
        }
    }

    @Test(
        "the adapter is chosen by name or address; an unknown one leaves the state unsupported",
        arguments: [
            ("hci1", CentralState.poweredOn), ("00:AA:01:00:00:01", .poweredOn), ("hci0", .poweredOff),
            ("hci7", .unsupported),
        ])
    func adapterChoice(selector: String, expected: CentralState) async throws {
        let scenario = """
            {\(Scenarios.timing), "adapters": [{"name": "hci0", "address": "00:AA:01:00:00:00", "powered": false},
                                               {"name": "hci1", "address": "00:AA:01:00:00:01"}]}
            """
        try await CentralHarness.run(scenario) { harness in
            let central = try await harness.central { $0.adapter = AdapterSelector(selector) }
            #expect(await central.state == expected)
            await central.close()
        }
    }

    @Test("the first adapter prefers a powered one")
    func firstPoweredAdapter() async throws {
        let scenario = """
            {\(Scenarios.timing), "adapters": [{"name": "hci0", "address": "00:AA:01:00:00:00", "powered": false},
                                               {"name": "hci1", "address": "00:AA:01:00:00:01"}]}
            """
        try await CentralHarness.run(scenario) { harness in
            let central = try await harness.central()
            #expect(await central.state == .poweredOn)
            #expect(await central.adapterAddress == BluetoothAddress("00:AA:01:00:00:01"))
            await central.close()
        }
    }

    @Test(
        "D-Bus errors map to Core Bluetooth meanings and keep BlueZ's name and message",
        arguments: [
            ("org.bluez.Error.Failed", "le-connection-abort-by-local", CentralError.Code.connectionFailed),
            ("org.bluez.Error.Failed", "br-connection-canceled", .cancelled),
            ("org.bluez.Error.NotSupported", "Operation is not supported", .operationNotSupported),
            ("org.bluez.Error.NotPermitted", "Read not permitted", .notPermitted),
            ("org.bluez.Error.NotAuthorized", "Operation Not Authorized", .notPermitted),
            ("org.bluez.Error.InvalidArguments", "Invalid Length", .invalidValueLength),
            ("org.bluez.Error.InvalidArguments", "Invalid offset", .invalidArguments),
            ("org.bluez.Error.InProgress", "In Progress", .inProgress),
            ("org.bluez.Error.NotConnected", "Not Connected", .notConnected),
            ("org.bluez.Error.Failed", "Not connected", .notConnected),
            ("org.bluez.Error.NotReady", "Resource Not Ready", .poweredOff),
            ("org.freedesktop.DBus.Error.ServiceUnknown", "The name org.bluez was not provided", .bluezUnavailable),
            ("org.freedesktop.DBus.Error.AccessDenied", "Rejected send message", .unauthorized),
            ("org.freedesktop.DBus.Error.UnknownObject", "Method \"Connect\" … doesn't exist", .unknownDevice),
            ("org.bluez.Error.Failed", "Operation failed with ATT error: 0x80", .failed),
        ])
    func errorMapping(name: String, message: String, code: CentralError.Code) {
        let error = CentralError(DBusError(DBusError.Name(name), message), operation: "org.bluez.Device1.Connect")
        #expect(error.code == code)
        #expect(error.bluezName == name)
        #expect(error.message == message)
        #expect(error.description == "org.bluez.Device1.Connect failed: \(name): \(message)")
    }
}
