import BlueZ
import TestSupport
import Testing

/// The D-Bus round trip to bluetoothd (`CentralManager.ping`, `lastRoundTrip`,
/// `startPinging`) against the simulator: libdbus answers `org.freedesktop.DBus.Peer.Ping` in
/// every connection, the simulator's as bluetoothd's.
@Suite("Central: D-Bus round trip to bluetoothd")
struct PingTests {
    @Test(
        "ping measures a positive round trip and keeps it; with bluetoothd gone it is nil and ping fails bluezUnavailable; back, measured again"
    )
    func roundTrip() async throws {
        try await CentralHarness.run(Scenarios.sensors()) { harness in
            let central = try await harness.central()
            let states = await central.stateUpdates()
            #expect(central.lastRoundTrip == nil)
            let measured = try await central.ping()
            #expect(measured > .zero && measured < .seconds(5))
            #expect(central.lastRoundTrip == measured)

            try await harness.sim.crash()
            _ = try await first(states, "resetting") { $0 == .resetting }
            #expect(central.lastRoundTrip == nil)
            await #expect { try await central.ping() } throws: { ($0 as? CentralError)?.code == .bluezUnavailable }

            try await harness.sim.restart()
            _ = try await first(states, "poweredOn after the restart") { $0 == .poweredOn }
            let again = try await central.ping()
            #expect(again > .zero && central.lastRoundTrip == again)
            await central.close()
        }
    }

    @Test(
        "startPinging keeps lastRoundTrip current on its own: measured at once, nil while bluetoothd is gone, measured again after it returns"
    )
    func periodic() async throws {
        try await CentralHarness.run(Scenarios.sensors()) { harness in
            let central = try await harness.central()
            await central.startPinging(every: .milliseconds(100))
            try await eventually("a first round trip") { central.lastRoundTrip.map { $0 > .zero } ?? false }
            try await harness.sim.crash(restartAfter: 1)
            try await eventually("no round trip while bluetoothd is gone") { central.lastRoundTrip == nil }
            try await eventually("a round trip to the restarted bluetoothd") {
                central.lastRoundTrip.map { $0 > .zero } ?? false
            }
            await central.close()
        }
    }
}
