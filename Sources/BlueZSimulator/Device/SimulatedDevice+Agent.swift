import DBus

/// Pairing that asks an agent (`org.bluez.Agent1`), as bluetoothd 5.66 does for a peer that
/// demands passkey entry or numeric comparison: the agent of the client that called `Pair()`,
/// else the default agent (agent.c `agent_get`), asked with bluetoothd's 60 s
/// (`REQUEST_TIMEOUT`); without an agent the pairing is NoInputNoOutput and such a peer fails it.
extension SimulatedDevice {
    /// How long bluetoothd waits for an agent's reply (agent.c `REQUEST_TIMEOUT`).
    static let agentTimeout = 60.0

    /// Asks the agent for the running `Pair()`: `RequestPasskey`, or `RequestConfirmation` with
    /// ``DeviceSpec/pairingPasskey``; the answer comes to ``BlueZSimulator/agentAnswered(_:attempt:_:)``.
    func askAgent(caller: String?, in simulator: isolated BlueZSimulator) {
        let path = self.path
        let own = caller.flatMap { owner in simulator.agents[owner].map { (owner: owner, path: $0) } }
        guard let agent = own ?? simulator.defaultAgent, let connection = simulator.connection else {
            // NoInputNoOutput cannot give the MITM protection the peer demands: SMP fails.
            pairing?.timer = simulator.after(Self.pairingDelay) {
                simulator.devices[path]?.endPairing(BlueZError.authenticationFailed, in: simulator)
            }
            return
        }
        pairingAgent = agent
        let attempt = pairingAttempt
        let method: String
        let arguments: [DBusValue]
        if spec.pairing == .numericComparison {
            (method, arguments) = ("RequestConfirmation", [.objectPath(path), .uint32(spec.pairingPasskey)])
        } else {
            (method, arguments) = ("RequestPasskey", [.objectPath(path)])
        }
        simulator.log?("simulator: \(spec.address) asks agent \(agent.path) of \(agent.owner): \(method)")
        Task {
            let result: Result<[DBusValue], DBusError>
            do {
                result = .success(
                    try await connection.call(
                        destination: agent.owner, path: agent.path, interface: "org.bluez.Agent1", method: method,
                        arguments: arguments, timeout: .seconds(Self.agentTimeout)))
            } catch {
                result = .failure(error as? DBusError ?? DBusError(.failed, "\(error)"))
            }
            simulator.agentAnswered(path, attempt: attempt, result)
        }
    }
}

extension BlueZSimulator {
    /// The default agent: the first registered (bluetoothd's queue of default agents, while no
    /// client asked `RequestDefaultAgent`).
    var defaultAgent: (owner: String, path: DBusObjectPath)? {
        guard let owner = agentOrder.first, let path = agents[owner] else { return nil }
        return (owner, path)
    }

    /// The agent answered (or its call failed) the question of `Pair()` number `attempt` of the
    /// device at `path`: the right passkey or a confirmation pairs; an error (`Rejected`,
    /// `Canceled`, no reply within 60 s — then the agent is told `Cancel`) or a wrong passkey
    /// fails the SMP exchange, and bluetoothd answers `AuthenticationFailed` (the kernel reports
    /// any SMP failure as an authentication failure).
    func agentAnswered(_ path: DBusObjectPath, attempt: Int, _ result: Result<[DBusValue], DBusError>) {
        guard let device = devices[path], device.pairingAttempt == attempt, let pending = device.pairing,
            device.pairingAgent != nil
        else { return }
        var accepted = false
        switch result {
        case .success(let values):
            accepted =
                device.spec.pairing == .numericComparison
                ? values.isEmpty : values.count == 1 && values[0].uint32 == device.spec.pairingPasskey
        case .failure(let error):
            log?("simulator: agent answered \(device.spec.address): \(error.name.rawValue)")
            // Only a question left unanswered is cancelled at the agent (agent.c `agent_cancel`).
            if error.name != .noReply { device.pairingAgent = nil }
        }
        guard accepted else { return device.endPairing(BlueZError.authenticationFailed, in: self) }
        device.pairingAgent = nil
        device.pairing = nil
        device.bonded(pending.reply, in: self)
    }
}
