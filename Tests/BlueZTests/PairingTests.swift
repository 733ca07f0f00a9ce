import BlueZ
import BlueZSimulator
import Bluetooth
import DBus
import Foundation
import TestSupport
import Testing

/// Pairing and forgetting a device through the central, against the simulator's `Device1.Pair`
/// and `Adapter1.RemoveDevice`.
@Suite("CentralManager: pair, isPaired, removeDevice")
struct PairingTests {
    @Test(
        "pair a connected device: paired; again: no error (AlreadyExists); removeDevice: a disconnection asked for, unknown, unpaired"
    )
    func pairAndRemove() async throws {
        try await CentralHarness.run(Scenarios.sensors()) { harness in
            let central = try await harness.central()
            let events = await central.connectionEvents()
            let (peripheral, _) = try await central.connectBattery(autoReconnect: false)
            #expect(try await central.isPaired(peripheral) == false)
            try await central.pair(peripheral)
            #expect(try await central.isPaired(peripheral))
            try await central.pair(peripheral)
            try await central.removeDevice(peripheral)
            // Gone from BlueZ when the call returns (a scan still running may find it again later).
            #expect(await central.isKnown(Scenarios.battery) == false)
            let dropped = try await first(events, "disconnected") {
                if case .disconnected = $0 { return true } else { return false }
            }
            guard case .disconnected(_, let error) = dropped else { return }
            #expect(error == nil, "asked for: no error")
            #expect(try await central.isPaired(peripheral) == false)
            try await central.removeDevice(peripheral)  // unknown now: nothing to do
            await central.close()
        }
    }

    @Test("a peripheral that refuses: BlueZ's AuthenticationFailed; a disconnected one: ConnectionAttemptFailed")
    func refused() async throws {
        try await CentralHarness.run(Scenarios.sensors(batteryPairing: "reject")) { harness in
            let central = try await harness.central()
            let peripheral = try await central.findBattery()
            await #expect { try await central.pair(peripheral) } throws: {
                ($0 as? CentralError)?.bluezName == "org.bluez.Error.ConnectionAttemptFailed"
            }
            try await central.connect(peripheral, timeout: .seconds(30), autoReconnect: false)
            await #expect { try await central.pair(peripheral) } throws: {
                ($0 as? CentralError)?.bluezName == "org.bluez.Error.AuthenticationFailed"
            }
            #expect(try await central.isPaired(peripheral) == false)
            await central.close()
        }
    }
}
