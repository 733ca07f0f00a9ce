import BlueZ
import BlueZSimulator
import Bluetooth
import Foundation
import TestSupport
import Testing

/// `waitUntilPoweredOn(timeout:)` of both managers, one implementation (BlueZManager): the wait
/// ends when the adapter comes on, with the state's error when the time is up, and at once with
/// `cancelled` when the manager is closed or the waiting task is cancelled.
@Suite("Waiting for power-on: the central and the peripheral manager alike")
struct PowerOnWaitTests {
    /// Both managers on an adapter that is off; each as a wait and a close, by role.
    struct Manager: Sendable {
        let role: String
        let wait: @Sendable (Duration) async throws -> Void
        let close: @Sendable () async -> Void
        /// The error's code name and message (nil: not a manager error).
        let describe: @Sendable (any Error) -> (code: String, message: String)?
    }

    static func managers(_ harness: CentralHarness) async throws -> [Manager] {
        let central = try await harness.central()
        let peripheral = try await PeripheralManager.start(
            options: PeripheralOptions(adapter: .name("hci0")), bus: harness.bus, on: harness.loop)
        return [
            Manager(
                role: "central", wait: { try await central.waitUntilPoweredOn(timeout: $0) },
                close: { await central.close() },
                describe: { ($0 as? CentralError).map { ($0.code.rawValue, $0.message) } }),
            Manager(
                role: "peripheral", wait: { try await peripheral.waitUntilPoweredOn(timeout: $0) },
                close: { await peripheral.close() },
                describe: { ($0 as? PeripheralError).map { ($0.code.rawValue, $0.message) } }),
        ]
    }

    static func poweredOff(_ body: (CentralHarness, [Manager]) async throws -> Void) async throws {
        try await CentralHarness.run(Scenarios.sensors()) { harness in
            try await harness.sim.setPowered(adapter: "hci0", false)
            let managers = try await managers(harness)
            try await body(harness, managers)
            for manager in managers { await manager.close() }
        }
    }

    @Test("the time is up: the state's error, the same in both roles")
    func timeout() async throws {
        try await Self.poweredOff { _, managers in
            for manager in managers {
                let started = ContinuousClock.now
                let error = await #expect(throws: (any Error).self) { try await manager.wait(.milliseconds(300)) }
                #expect(ContinuousClock.now - started >= .milliseconds(300), "\(manager.role)")
                let described = error.flatMap(manager.describe)
                #expect(described?.code == "poweredOff", "\(manager.role): \(String(describing: error))")
                #expect(described?.message == "the adapter hci0 is powered off", "\(manager.role)")
            }
        }
    }

    @Test("the adapter comes on while waiting: the wait returns")
    func poweredOn() async throws {
        try await Self.poweredOff { harness, managers in
            for manager in managers {
                let waiting = Task { try await manager.wait(.seconds(30)) }
                try await Task.sleep(for: .milliseconds(100))
                try await harness.sim.setPowered(adapter: "hci0", true)
                try await within(10, "\(manager.role): the wait to return") { try await waiting.value }
                try await harness.sim.setPowered(adapter: "hci0", false)
            }
        }
    }

    @Test("the manager is closed, or the waiting task cancelled: the wait ends at once with cancelled")
    func cancelled() async throws {
        try await Self.poweredOff { _, managers in
            for manager in managers {
                let described = try await Self.wait(manager, endedBy: { $0.cancel() })
                #expect(described?.code == "cancelled", "\(manager.role): \(String(describing: described))")
            }
            for manager in managers {
                let described = try await Self.wait(manager, endedBy: { _ in await manager.close() })
                #expect(described?.code == "cancelled", "\(manager.role)")
                #expect(described?.message == "the \(manager.role) manager was closed")
            }
        }
    }

    /// A 30 s wait that `end` ends after 0.1 s: what it threw, once it ended (within 5 s).
    static func wait(_ manager: Manager, endedBy end: (Task<Void, any Error>) async -> Void) async throws -> (
        code: String, message: String
    )? {
        let waiting = Task { try await manager.wait(.seconds(30)) }
        try await Task.sleep(for: .milliseconds(100))
        await end(waiting)
        let error = try await within(5, "\(manager.role): the wait to end") {
            await #expect(throws: (any Error).self) { try await waiting.value }
        }
        return error.flatMap(manager.describe)
    }
}
