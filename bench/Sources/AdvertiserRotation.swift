import BlueZSimulator
import Foundation

/// ``SoakScenario/advertisers`` ATC1441 thermometers at a time; every ``period`` seconds the
/// oldest leaves (the simulator removes it: InterfacesRemoved) and a new address appears, so
/// the gateway keeps meeting devices and forgetting them: each address lives 50 s, and the
/// gateway's registry (`bluetooth.max_devices`, 1,000) is full after about 200 s — before the
/// soak's 5-minute warm-up ends, so the RSS after it is that of the steady state, in which every
/// new device makes room by forgetting the longest-silent one.
final class AdvertiserRotation: Sendable {
    let period = 0.25
    private struct State {
        var live: [Int] = []
        var head = 0
        var nextSerial = 0
        var added = 0
    }
    private let state = Locked(State())
    private let task = Locked<Task<Void, Never>?>(nil)

    /// Distinct addresses so far.
    var added: Int { state.value.withLock { $0.added } }

    /// Adds the first advertisers, then rotates until ``stop()``; skips a turn while `paused`.
    func start(_ simulator: BlueZSimulator, paused: Locked<Bool>) async throws {
        for _ in 0..<SoakScenario.advertisers { try await add(simulator) }
        let handle = Task { [self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(period))
                if paused.value.withLock({ $0 }) { continue }
                await rotate(simulator)
            }
        }
        task.value.withLock { $0 = handle }
    }

    func stop() { task.value.withLock { $0?.cancel() } }

    private func add(_ simulator: BlueZSimulator) async throws {
        let serial = state.value.withLock { state in
            defer { state.nextSerial += 1 }
            return state.nextSerial
        }
        try await simulator.addDevice(json: SoakScenario.advertiserJSON(serial))
        state.value.withLock {
            $0.live.append(serial)
            $0.added += 1
        }
    }

    /// The oldest goes (kept for the next turn if the simulator refuses), a new one comes.
    private func rotate(_ simulator: BlueZSimulator) async {
        guard let oldest = state.value.withLock({ $0.head < $0.live.count ? $0.live[$0.head] : nil }) else { return }
        guard (try? await simulator.removeDevice(address: SoakScenario.advertiserAddress(oldest))) != nil else {
            return
        }
        state.value.withLock { state in
            state.head += 1
            if state.head > 4096 {
                state.live.removeFirst(state.head)
                state.head = 0
            }
        }
        try? await add(simulator)
    }
}
