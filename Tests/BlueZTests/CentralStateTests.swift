import BlueZ
import BlueZSimulator
import Bluetooth
import DBus
import Foundation
import Synchronization
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

    @Test(
        "stateUpdates(handler:): the state at once, then each change on the loop thread as the central sees it, until stopStateUpdates"
    )
    func stateHandler() async throws {
        try await CentralHarness.run(Scenarios.sensors()) { harness in
            let central = try await harness.central()
            let seen = SeenOnLoop<CentralState>()
            let loop = central.loop
            let token = await central.stateUpdates { state in seen.append(state, onLoop: loop.inLoop) }
            #expect(seen.items == [.poweredOn], "the state now, before stateUpdates(handler:) returned")
            // A stream is told in the same handling of the change as the handler; once the stream
            // has a state, a call to the central (after that handling, on the loop) finds the
            // handler done with it.
            let states = await central.stateUpdates()
            try await harness.sim.setPowered(adapter: "hci0", false)
            _ = try await first(states, "poweredOff") { $0 == .poweredOff }
            try await harness.sim.setPowered(adapter: "hci0", true)
            _ = try await first(states, "poweredOn again") { $0 == .poweredOn }
            _ = await central.state
            #expect(seen.items == [.poweredOn, .poweredOff, .poweredOn])
            #expect(seen.allOnLoop)
            await central.stopStateUpdates(token)
            try await harness.sim.setPowered(adapter: "hci0", false)
            _ = try await first(states, "poweredOff after the handler was removed") { $0 == .poweredOff }
            _ = await central.state
            #expect(seen.items == [.poweredOn, .poweredOff, .poweredOn], "nothing after stopStateUpdates")
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
        // (The ATT codes of these replies: attErrorCodes below.)
        let error = CentralError(DBusError(DBusError.Name(name), message), operation: "org.bluez.Device1.Connect")
        #expect(error.code == code)
        #expect(error.bluezName == name)
        #expect(error.message == message)
        #expect(error.description == "org.bluez.Device1.Connect failed: \(name): \(message)")
    }

    @Test(
        "the ATT error code and Core Bluetooth's numeric error are read back from BlueZ's reply",
        arguments: [
            (
                "org.bluez.Error.NotPermitted", "Read not permitted", UInt8?(0x02),
                CoreBluetoothErrorCode(domain: .att, code: 2)
            ),
            (
                "org.bluez.Error.NotPermitted", "Write not permitted", 0x03,
                CoreBluetoothErrorCode(domain: .att, code: 3)
            ),
            ("org.bluez.Error.NotPermitted", "Not paired", 0x05, CoreBluetoothErrorCode(domain: .att, code: 5)),
            ("org.bluez.Error.InvalidArguments", "Invalid offset", 0x07, CoreBluetoothErrorCode(domain: .att, code: 7)),
            (
                "org.bluez.Error.NotAuthorized", "Operation Not Authorized", 0x08,
                CoreBluetoothErrorCode(domain: .att, code: 8)
            ),
            (
                "org.bluez.Error.InvalidArguments", "Invalid Length", 0x0D,
                CoreBluetoothErrorCode(domain: .att, code: 13)
            ),
            (
                "org.bluez.Error.Failed", "Operation failed with ATT error: 0x0e", 0x0E,
                CoreBluetoothErrorCode(domain: .att, code: 14)
            ),
            (
                "org.bluez.Error.Failed", "Operation failed with ATT error: 0x80", 0x80,
                CoreBluetoothErrorCode(domain: .att, code: 0x80)
            ),
            (
                "org.bluez.Error.Failed", "Operation failed with ATT error: 0x9f", 0x9F,
                CoreBluetoothErrorCode(domain: .att, code: 0x9F)
            ),
            (
                "org.bluez.Error.Failed", "Operation failed with ATT error: 0xfd", 0xFD,
                CoreBluetoothErrorCode(domain: .att, code: 0xFD)
            ),
            // Not ATT error responses: BlueZ's own refusals and link failures.
            (
                "org.bluez.Error.Failed", "Operation failed with ATT error: 0x", nil,
                CoreBluetoothErrorCode(domain: .central, code: 0)
            ),
            (
                "org.bluez.Error.Failed", "Operation failed with ATT error: 0xzz", nil,
                CoreBluetoothErrorCode(domain: .central, code: 0)
            ),
            (
                "org.bluez.Error.NotSupported", "Operation is not supported", nil,
                CoreBluetoothErrorCode(domain: .central, code: 13)
            ),
            ("org.bluez.Error.NotPermitted", "Write acquired", nil, nil),
            (
                "org.bluez.Error.Failed", "le-connection-abort-by-local", nil,
                CoreBluetoothErrorCode(domain: .central, code: 10)
            ),
            ("org.bluez.Error.Failed", "Not connected", nil, CoreBluetoothErrorCode(domain: .central, code: 3)),
            ("org.bluez.Error.NotReady", "Resource Not Ready", nil, nil),
            (
                "org.freedesktop.DBus.Error.UnknownObject", "gone", nil,
                CoreBluetoothErrorCode(domain: .central, code: 12)
            ),
        ])
    func attErrorCodes(name: String, message: String, att: UInt8?, coreBluetooth: CoreBluetoothErrorCode?) {
        let error = CentralError(
            DBusError(DBusError.Name(name), message), operation: "org.bluez.GattCharacteristic1.ReadValue")
        #expect(error.attError == att)
        #expect(error.coreBluetoothError == coreBluetooth)
    }

    @Test("a connect that timed out and one that was cancelled carry CBError 6 and 5")
    func localErrorCodes() {
        #expect(
            CentralError(.connectionTimeout, operation: "connect", message: "timed out").coreBluetoothError
                == CoreBluetoothErrorCode(domain: .central, code: 6))
        #expect(
            CentralError(.cancelled, operation: "connect", message: "cancelled").coreBluetoothError
                == CoreBluetoothErrorCode(domain: .central, code: 5))
        #expect(
            PeripheralError(.alreadyExists, operation: "advertise", message: "x").coreBluetoothError
                == CoreBluetoothErrorCode(domain: .central, code: 9))
        #expect(PeripheralError(.invalidValueLength, operation: "update", message: "x").attError == 0x0D)
    }
}

/// What a handler was given, and whether each call came on the loop thread.
final class SeenOnLoop<Item: Sendable>: Sendable {
    private let seen = Mutex<(items: [Item], allOnLoop: Bool)>(([], true))

    func append(_ item: Item, onLoop: Bool) {
        seen.withLock {
            $0.items.append(item)
            $0.allOnLoop = $0.allOnLoop && onLoop
        }
    }

    var items: [Item] { seen.withLock { $0.items } }
    var allOnLoop: Bool { seen.withLock { $0.allOnLoop } }
}
