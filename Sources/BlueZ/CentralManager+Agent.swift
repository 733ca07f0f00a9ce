import Bluetooth
import DBus

/// The central's pairing agent (`org.bluez.Agent1`, capability KeyboardDisplay; docs/central.md,
/// "Pairing"): exported on the manager's own connection and registered with
/// `AgentManager1.RegisterAgent` — again after bluetoothd came back. bluetoothd asks the agent of
/// the connection that called `Device1.Pair` (agent.c `agent_get(sender)`), so this manager's
/// ``pair(_:timeout:)`` is asked here; it never asks to be the default agent
/// (`RequestDefaultAgent`), though bluetoothd makes the first agent registered the default while
/// no other is. Its decisions are ``PairingAgentState``'s (PairingAgent.swift), without the bus.
extension CentralManager {
    /// The agent's object path on the manager's connection.
    public static let agentPath: DBusObjectPath = "/org/gattway/agent"
    static let agentInterface = "org.bluez.Agent1"
    static let agentManagerInterface = "org.bluez.AgentManager1"

    /// Starts the pairing agent: exports `org.bluez.Agent1` and registers it with bluetoothd
    /// (now and after every bluetoothd restart); questions and cancellations go to `handler` on
    /// the loop thread. Answer a question with ``answerPairing(_:_:)``. Calling it again replaces
    /// the handler.
    public func startPairingAgent(_ handler: @escaping @Sendable (PairingAgentEvent) -> Void) async {
        agent.handler = handler
        guard !agent.exported else { return await registerAgent() }
        agent.exported = true
        do { try exportAgent() } catch {
            agent.lastError = "export: \(error)"
            return
        }
        await registerAgent()
    }

    /// Stops handing questions to the handler: what waits is refused (`Canceled`), and every
    /// later question too, until ``startPairingAgent(_:)`` again. The agent stays registered.
    public func stopPairingAgent() {
        agent.stop()
    }

    /// The manager's unique name on the bus (`:1.42`): where bluetoothd calls the agent.
    public nonisolated var busName: String { connection.uniqueName }

    /// Whether bluetoothd has the agent registered now; why not (nil: no failure).
    public var pairingAgentStatus: (registered: Bool, error: String?) { (agent.registered, agent.lastError) }

    /// Answers question `id`; false when it is not waiting (answered, timed out or cancelled
    /// already), and then nothing is sent. A passkey answers only a passkey entry, accept and
    /// reject anything but it (a mismatched answer is sent as a rejection).
    @discardableResult
    public func answerPairing(_ id: Int, _ answer: PairingAnswer) -> Bool {
        agent.answer(id, answer)
    }

    /// RegisterAgent, once bluetoothd is there; AlreadyExists counts as registered.
    func registerAgent() async {
        guard agent.handler != nil, !agent.registered, bluezOwner != nil, !closed else { return }
        do {
            _ = try await callBlueZ(
                "/org/bluez", Self.agentManagerInterface, "RegisterAgent",
                [.objectPath(Self.agentPath), .string("KeyboardDisplay")], timeout: .seconds(5))
            agent.registered = true
            agent.lastError = nil
        } catch let error as DBusError where error.name.rawValue == "org.bluez.Error.AlreadyExists" {
            agent.registered = true
            agent.lastError = nil
        } catch {
            agent.lastError = "\(error)"
        }
    }

    /// bluetoothd left: its questions are void, and the agent is registered again when it is back.
    func agentLost() {
        tell(agent.lost())
    }

    /// Hands the agent's events to its handler, once the agent's state is settled (the handler
    /// may answer at once).
    private func tell(_ events: [PairingAgentEvent]) {
        for event in events { agent.handler?(event) }
    }

    // MARK: Agent1, as bluetoothd calls it

    private func exportAgent() throws {
        let interface = agentInterface()
        try connection.assumeIsolated { try $0.export([interface], at: Self.agentPath, announce: false) }
    }

    private nonisolated func agentInterface() -> DBusInterface {
        DBusInterface(
            Self.agentInterface,
            methods: PairingAgentMethod.allCases.map { method in
                if method.question != nil {
                    return .deferred(method.rawValue, in: method.input, out: method.output) { [weak self] call, reply in
                        self?.assumeLoopIsolated { $0.agentAsked(method, call, reply) }
                    }
                }
                return .immediate(method.rawValue, in: method.input, out: method.output) { [weak self] call in
                    try self?.assumeLoopIsolated { try $0.agentCalled(method, call) }
                    return []
                }
            })
    }

    /// An Agent1 call answered at once (Release, DisplayPasskey, Cancel, the legacy PIN calls).
    private func agentCalled(_ method: PairingAgentMethod, _ call: DBusMessage) throws {
        tell(try agent.called(method, call, bluez: bluezOwner, device: address(ofDevicePath:), nextID: &nextID))
    }

    /// An Agent1 question: refused at once, or asked, its reply kept for ``answerPairing(_:_:)``.
    private func agentAsked(_ method: PairingAgentMethod, _ call: DBusMessage, _ reply: DBusPendingReply) {
        tell(agent.asked(method, call, reply, bluez: bluezOwner, device: address(ofDevicePath:), nextID: &nextID))
    }
}
