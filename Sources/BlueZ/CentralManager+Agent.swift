import Bluetooth
import DBus

/// The central's pairing agent (`org.bluez.Agent1`, capability KeyboardDisplay; docs/central.md,
/// "Pairing"): exported on the manager's own connection and registered with
/// `AgentManager1.RegisterAgent` — again after bluetoothd came back. bluetoothd asks the agent of
/// the connection that called `Device1.Pair` (agent.c `agent_get(sender)`), so this manager's
/// ``pair(_:timeout:)`` is asked here; it never asks to be the default agent
/// (`RequestDefaultAgent`), though bluetoothd makes the first agent registered the default while
/// no other is.
struct PairingAgentState {
    /// Where questions go (nil: the agent is not started).
    var handler: (@Sendable (PairingAgentEvent) -> Void)?
    var exported = false
    var registered = false
    /// Questions waiting for their answer, by id.
    var pending: [Int: (address: BluetoothAddress, method: PairingMethod, reply: DBusPendingReply)] = [:]
    /// Devices this manager's ``CentralManager/pair(_:timeout:)`` pairs now.
    var pairingNow: [BluetoothAddress: Int] = [:]
    /// Why the last registration failed (nil: registered, or not tried).
    var lastError: String?

    /// At most this many questions wait at once (bluetoothd asks one agent one question at a
    /// time; this bounds anyone else).
    static let maxPending = 8
}

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
        agent.handler = nil
        for entry in agent.pending.values { entry.reply.fail(DBusError("org.bluez.Error.Canceled", "canceled")) }
        agent.pending.removeAll()
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
        guard let pending = agent.pending.removeValue(forKey: id) else { return false }
        let rejected = DBusError("org.bluez.Error.Rejected", "rejected")
        switch (answer, pending.method) {
        case (.passkey(let passkey), .passkeyEntry) where passkey <= 999_999: pending.reply.succeed([.uint32(passkey)])
        case (.accept, .numericComparison), (.accept, .authorization): pending.reply.succeed()
        case (.cancel, _): pending.reply.fail(DBusError("org.bluez.Error.Canceled", "canceled"))
        default: pending.reply.fail(rejected)
        }
        return true
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
        agent.registered = false
        let ids = agent.pending.keys.sorted()
        agent.pending.removeAll()
        for id in ids { agent.handler?(.cancelled(id)) }
    }

    // MARK: Agent1, as bluetoothd calls it

    private func exportAgent() throws {
        let interface = agentInterface()
        try connection.assumeIsolated { try $0.export([interface], at: Self.agentPath, announce: false) }
    }

    private nonisolated func agentInterface() -> DBusInterface {
        let object: DBusSignature = [.objectPath]
        return DBusInterface(
            Self.agentInterface,
            methods: [
                .immediate("Release") { [weak self] call in
                    self?.assumeLoopIsolated { $0.agentCall(call) { $0.agent.registered = false } }
                    return []
                },
                .immediate("RequestPinCode", in: object, out: [.string]) { _ in throw Self.legacyPIN },
                .immediate("DisplayPinCode", in: [.objectPath, .string]) { _ in throw Self.legacyPIN },
                .deferred("RequestPasskey", in: object, out: [.uint32]) { [weak self] call, reply in
                    self?.assumeLoopIsolated { $0.ask(call, reply, .passkeyEntry) }
                },
                .immediate("DisplayPasskey", in: [.objectPath, .uint32, .uint16]) { [weak self] call in
                    self?.assumeLoopIsolated { $0.display(call) }
                    return []
                },
                .deferred("RequestConfirmation", in: [.objectPath, .uint32]) { [weak self] call, reply in
                    self?.assumeLoopIsolated { $0.ask(call, reply, .numericComparison) }
                },
                .deferred("RequestAuthorization", in: object) { [weak self] call, reply in
                    self?.assumeLoopIsolated { $0.ask(call, reply, .authorization) }
                },
                .deferred("AuthorizeService", in: [.objectPath, .string]) { [weak self] call, reply in
                    self?.assumeLoopIsolated { $0.ask(call, reply, .authorization) }
                },
                .immediate("Cancel") { [weak self] call in
                    self?.assumeLoopIsolated { $0.agentCall(call) { $0.cancelQuestions() } }
                    return []
                },
            ])
    }

    private static let legacyPIN = DBusError(
        "org.bluez.Error.Rejected", "gattway pairs LE devices only: legacy PIN code pairing is not supported")

    /// Runs `body` for a call from bluetoothd only: anyone else on the bus is ignored.
    private func agentCall(_ call: DBusMessage, _ body: (isolated CentralManager) -> Void) {
        guard call.sender != nil, call.sender == bluezOwner else { return }
        body(self)
    }

    /// A question that waits for its answer: refused at once when it is not bluetoothd's, names
    /// no device this manager knows, or one is waiting for the device already, or too many wait.
    private func ask(_ call: DBusMessage, _ reply: DBusPendingReply, _ method: PairingMethod) {
        func reject(_ why: String) { reply.fail(DBusError("org.bluez.Error.Rejected", why)) }
        guard call.sender != nil, call.sender == bluezOwner else { return reject("not bluetoothd") }
        guard let handler = agent.handler, let path = call.arguments.first?.objectPath,
            let address = address(ofDevicePath: path)
        else { return reject("unknown device") }
        guard !agent.pending.values.contains(where: { $0.address == address }) else {
            return reject("a question about \(address) is waiting already")
        }
        guard agent.pending.count < PairingAgentState.maxPending else { return reject("too many questions waiting") }
        nextID += 1
        let id = nextID
        agent.pending[id] = (address, method, reply)
        let passkey = call.arguments.count > 1 ? call.arguments[1].uint32 : nil
        let service = call.member == "AuthorizeService" ? call.arguments[1].string : nil
        handler(
            .question(
                PairingQuestion(
                    id: id, address: address, method: method, passkey: passkey, service: service,
                    pairingHere: agent.pairingNow[address] != nil)))
    }

    /// `DisplayPasskey`: told once per pairing (its later calls count the digits typed).
    private func display(_ call: DBusMessage) {
        guard call.sender != nil, call.sender == bluezOwner, let handler = agent.handler,
            let path = call.arguments.first?.objectPath, let address = address(ofDevicePath: path),
            call.arguments.count == 3, let passkey = call.arguments[1].uint32, call.arguments[2].uint16 == 0
        else { return }
        nextID += 1
        handler(
            .question(
                PairingQuestion(
                    id: nextID, address: address, method: .passkeyDisplay, passkey: passkey,
                    pairingHere: agent.pairingNow[address] != nil)))
    }

    /// `Cancel`: bluetoothd stopped waiting for the question it asked.
    private func cancelQuestions() {
        let ids = agent.pending.keys.sorted()
        for id in ids {
            agent.pending.removeValue(forKey: id)?.reply.fail(DBusError("org.bluez.Error.Canceled", "canceled"))
            agent.handler?(.cancelled(id))
        }
    }
}
