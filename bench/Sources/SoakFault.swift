import BlueZSimulator
import Foundation
import TestSupport

/// The faults `make soak` injects, in turn, one every ``Soak/faultInterval`` seconds.
enum SoakFault: String, CaseIterable, Sendable {
    /// Every connected device drops its link (supervision timeout, out of range).
    case peerDisconnect = "peer disconnect"
    /// bluetoothd dies without InterfacesRemoved, its sockets hang up; a fresh one takes
    /// `org.bluez` 1 s later with an object tree of adapters only.
    case bluetoothdRestart = "bluetoothd restart"
    /// mosquitto is killed with SIGKILL and started again on the same port 3 s later.
    case brokerKill = "broker SIGKILL + restart"
    /// The adapter is powered off and on again 2 s later.
    case adapterPowerCycle = "adapter power cycle"

    /// One injected fault: when it began and when the world was whole again (seconds on the
    /// monotonic clock).
    struct Record: Sendable {
        var fault: SoakFault
        var started: Double
        var ended: Double
    }

    /// Injects the fault and returns once it is over (the broker accepts connections again, the
    /// new bluetoothd owns the name, the adapter is on). `bluezDown` is set while bluetoothd is
    /// gone, so nothing else changes the simulator's world meanwhile.
    func inject(world: SimulatedWorld, broker: MosquittoBroker, bluezDown: Locked<Bool>) async throws -> Record {
        let started = Soak.monotonic()
        switch self {
        case .peerDisconnect:
            for address in SoakScenario.connected { try? await world.simulator.disconnectPeer(address: address) }
        case .bluetoothdRestart:
            bluezDown.value.withLock { $0 = true }
            defer { bluezDown.value.withLock { $0 = false } }
            await world.simulator.crash()
            try await Task.sleep(for: .seconds(1))
            try await world.simulator.restart()
        case .brokerKill:
            broker.kill()
            try await Task.sleep(for: .seconds(3))
            try await broker.start()
        case .adapterPowerCycle:
            await world.simulator.setPowered(adapter: SoakScenario.adapter, false)
            try await Task.sleep(for: .seconds(2))
            await world.simulator.setPowered(adapter: SoakScenario.adapter, true)
        }
        return Record(fault: self, started: started, ended: Soak.monotonic())
    }
}
