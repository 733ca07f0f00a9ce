import BlueZ
import BlueZSimulator
import Bluetooth
import DBus
import Foundation
import Synchronization
import TestSupport
import Testing

/// The central's pairing agent (`org.bluez.Agent1`) against the simulator's `Device1.Pair`,
/// which asks it as bluetoothd does for a peer that demands passkey entry or numeric comparison.
@Suite("CentralManager: the pairing agent")
struct AgentTests {
    /// The questions an agent got, for a test to wait on.
    final class Questions: Sendable {
        let events = Mutex<[PairingAgentEvent]>([])

        func add(_ event: PairingAgentEvent) { events.withLock { $0.append(event) } }

        func question(after count: Int = 0) async throws -> PairingQuestion {
            let deadline = ContinuousClock.now + .seconds(10)
            while ContinuousClock.now < deadline {
                let found = events.withLock { events in
                    events.dropFirst(count).compactMap { event -> PairingQuestion? in
                        if case .question(let question) = event { return question } else { return nil }
                    }.first
                }
                if let found { return found }
                try await Task.sleep(for: .milliseconds(20))
            }
            throw TestTimeout(description: "no pairing question")
        }

        var count: Int { events.withLock { $0.count } }
    }

    static func pairing(_ central: CentralManager, _ peripheral: Peripheral) -> Task<String?, Never> {
        Task {
            do {
                try await central.pair(peripheral, timeout: .seconds(20))
                return nil
            } catch {
                return (error as? CentralError)?.bluezName ?? "\(error)"
            }
        }
    }

    @Test("passkey entry: the question names the device; a wrong passkey fails, the right one pairs")
    func passkeyEntry() async throws {
        try await CentralHarness.run(Scenarios.sensors(batteryPairing: "passkey_entry")) { harness in
            let central = try await harness.central()
            let questions = Questions()
            await central.startPairingAgent { questions.add($0) }
            #expect(await central.pairingAgentStatus.registered)
            let (peripheral, _) = try await central.connectBattery(autoReconnect: false)

            let first = Self.pairing(central, peripheral)
            let asked = try await questions.question()
            #expect(asked.method == .passkeyEntry)
            #expect(asked.address == Scenarios.battery)
            #expect(asked.pairingHere)
            #expect(asked.passkey == nil)
            #expect(await central.answerPairing(asked.id, .passkey(111_111)))
            #expect(await first.value == "org.bluez.Error.AuthenticationFailed")
            #expect(!(await central.answerPairing(asked.id, .passkey(123_456))), "answered already")
            #expect(try await central.isPaired(peripheral) == false)

            let mark = questions.count
            let second = Self.pairing(central, peripheral)
            let again = try await questions.question(after: mark)
            #expect(await central.answerPairing(again.id, .passkey(123_456)))
            #expect(await second.value == nil)
            #expect(try await central.isPaired(peripheral))
            await central.close()
        }
    }

    @Test("numeric comparison: the number comes with the question; rejected fails, accepted pairs")
    func numericComparison() async throws {
        try await CentralHarness.run(Scenarios.sensors(batteryPairing: "numeric_comparison")) { harness in
            let central = try await harness.central()
            let questions = Questions()
            await central.startPairingAgent { questions.add($0) }
            let (peripheral, _) = try await central.connectBattery(autoReconnect: false)
            let first = Self.pairing(central, peripheral)
            let asked = try await questions.question()
            #expect(asked.method == .numericComparison)
            #expect(asked.passkey == 123_456)
            await central.answerPairing(asked.id, .reject)
            #expect(await first.value == "org.bluez.Error.AuthenticationFailed")
            let mark = questions.count
            let second = Self.pairing(central, peripheral)
            await central.answerPairing(try await questions.question(after: mark).id, .accept)
            #expect(await second.value == nil)
            #expect(try await central.isPaired(peripheral))
            await central.close()
        }
    }

    @Test("without an agent such a peer fails; anyone but bluetoothd calling the agent is refused")
    func noAgentAndStrangers() async throws {
        try await CentralHarness.run(Scenarios.sensors(batteryPairing: "passkey_entry")) { harness in
            let central = try await harness.central()
            let (peripheral, _) = try await central.connectBattery(autoReconnect: false)
            await #expect { try await central.pair(peripheral, timeout: .seconds(10)) } throws: {
                ($0 as? CentralError)?.bluezName == "org.bluez.Error.AuthenticationFailed"
            }
            let questions = Questions()
            await central.startPairingAgent { questions.add($0) }
            // Another client of the bus calls the agent: refused, and no question comes out.
            let stranger = try await harness.client()
            let name = central.busName
            await #expect(throws: DBusError.self) {
                _ = try await stranger.call(
                    destination: name, path: CentralManager.agentPath, interface: "org.bluez.Agent1",
                    method: "RequestPasskey", arguments: [.objectPath("/org/bluez/hci0/dev_A4_C1_38_00_00_01")],
                    timeout: .seconds(5))
            }
            await #expect(throws: DBusError.self) {
                _ = try await stranger.call(
                    destination: name, path: CentralManager.agentPath, interface: "org.bluez.Agent1",
                    method: "RequestPinCode", arguments: [.objectPath("/org/bluez/hci0/dev_A4_C1_38_00_00_01")],
                    timeout: .seconds(5))
            }
            #expect(questions.count == 0)
            await stranger.close()
            await central.close()
        }
    }

    @Test("registered again after bluetoothd restarts: the next pairing asks it")
    func afterRestart() async throws {
        try await CentralHarness.run(Scenarios.sensors(batteryPairing: "passkey_entry")) { harness in
            let central = try await harness.central()
            let questions = Questions()
            await central.startPairingAgent { questions.add($0) }
            try await harness.sim.crash(restartAfter: 0.3)
            let deadline = ContinuousClock.now + .seconds(10)
            while await central.state == .poweredOn, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(10))
            }
            try await central.waitUntilPoweredOn(timeout: .seconds(10))
            while !(await central.pairingAgentStatus.registered), ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(await central.pairingAgentStatus.registered)
            let (peripheral, _) = try await central.connectBattery(autoReconnect: false)
            let pairing = Self.pairing(central, peripheral)
            await central.answerPairing(try await questions.question().id, .passkey(123_456))
            #expect(await pairing.value == nil)
            await central.close()
        }
    }
}
