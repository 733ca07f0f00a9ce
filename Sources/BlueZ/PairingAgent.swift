import Bluetooth
import DBus

/// Where the reply to an agent question goes: the D-Bus reply bluetoothd waits for
/// (``DBusPendingReply``), or a recording in the `agent-calls` fuzz target. Completed once; a
/// second completion is ignored.
package protocol PairingAgentReply: Sendable {
    func succeed(_ values: [DBusValue])
    func fail(_ error: DBusError)
}

extension DBusPendingReply: PairingAgentReply {}

/// The methods of `org.bluez.Agent1` the central's agent exports, with the arguments the
/// connection checks before the agent sees a call (a call that does not match gets
/// `InvalidArgs`, an unknown method `UnknownMethod`, and neither reaches the agent).
package enum PairingAgentMethod: String, CaseIterable, Sendable {
    case release = "Release"
    case requestPinCode = "RequestPinCode"
    case displayPinCode = "DisplayPinCode"
    case requestPasskey = "RequestPasskey"
    case displayPasskey = "DisplayPasskey"
    case requestConfirmation = "RequestConfirmation"
    case requestAuthorization = "RequestAuthorization"
    case authorizeService = "AuthorizeService"
    case cancel = "Cancel"

    package var input: DBusSignature {
        switch self {
        case .release, .cancel: .empty
        case .requestPinCode, .requestPasskey, .requestAuthorization: [.objectPath]
        case .displayPinCode, .authorizeService: [.objectPath, .string]
        case .displayPasskey: [.objectPath, .uint32, .uint16]
        case .requestConfirmation: [.objectPath, .uint32]
        }
    }

    package var output: DBusSignature {
        switch self {
        case .requestPinCode: [.string]
        case .requestPasskey: [.uint32]
        default: .empty
        }
    }

    /// What a method that waits for an answer asks (its reply is deferred); nil: answered at once.
    package var question: PairingMethod? {
        switch self {
        case .requestPasskey: .passkeyEntry
        case .requestConfirmation: .numericComparison
        case .requestAuthorization, .authorizeService: .authorization
        default: nil
        }
    }
}

/// The central's pairing agent without its bus (docs/central.md, "Pairing"): which `Agent1` calls
/// become questions, which are refused and how, what an answer replies. ``CentralManager`` keeps
/// it and hands it the calls its exported `org.bluez.Agent1` receives, on its loop; the
/// `agent-calls` fuzz target hands it hostile ones. What the handler is to be told is returned,
/// not told from inside: a handler may answer at once, which changes this state again.
package struct PairingAgentState {
    struct Pending {
        var address: BluetoothAddress
        var method: PairingMethod
        var reply: any PairingAgentReply
    }

    /// Where questions go (nil: the agent is not started).
    package var handler: (@Sendable (PairingAgentEvent) -> Void)?
    var exported = false
    /// Whether bluetoothd has the agent registered (its `Release` says no more).
    package var registered = false
    /// Questions waiting for their answer, by id.
    var pending: [Int: Pending] = [:]
    /// Devices this manager's ``CentralManager/pair(_:timeout:)`` pairs now.
    package var pairingNow: [BluetoothAddress: Int] = [:]
    /// Why the last registration failed (nil: registered, or not tried).
    var lastError: String?

    /// At most this many questions wait at once (bluetoothd asks one agent one question at a
    /// time; this bounds anyone else).
    package static let maxPending = 8
    /// The largest passkey (six digits): a larger one in a question is refused, in an answer
    /// sent as a rejection.
    package static let maxPasskey: UInt32 = 999_999

    package static let legacyPIN = DBusError(
        "org.bluez.Error.Rejected", "gattway pairs LE devices only: legacy PIN code pairing is not supported")
    static let canceled = DBusError("org.bluez.Error.Canceled", "canceled")

    package init() {}

    /// The addresses of the questions waiting, by id.
    package var waiting: [Int: BluetoothAddress] { pending.mapValues(\.address) }

    /// A call of a method answered at once (``PairingAgentMethod/question`` nil), its arguments
    /// matching the method's input: the handler's events (the reply is empty; thrown: the error
    /// reply). `bluez` is the unique name owning `org.bluez` now; `device` finds the address of
    /// a device object.
    package mutating func called(
        _ method: PairingAgentMethod, _ call: DBusMessage, bluez: String?,
        device: (DBusObjectPath) -> BluetoothAddress?, nextID: inout Int
    ) throws -> [PairingAgentEvent] {
        switch method {
        case .requestPinCode, .displayPinCode: throw Self.legacyPIN
        case .release:
            if Self.fromBlueZ(call, bluez) { registered = false }
            return []
        case .displayPasskey: return display(call, bluez: bluez, device: device, nextID: &nextID)
        case .cancel: return Self.fromBlueZ(call, bluez) ? cancelQuestions() : []
        case .requestPasskey, .requestConfirmation, .requestAuthorization, .authorizeService:
            throw DBusError(.failed, "\(method.rawValue) waits for an answer")
        }
    }

    /// A question that waits for its answer (``PairingAgentMethod/question`` not nil): refused at
    /// once when it is not bluetoothd's, names no device `device` knows, or one is waiting for the
    /// device already, or too many wait, or its passkey has more than six digits; else `reply` is kept for the answer and the question
    /// returned for the handler.
    package mutating func asked(
        _ method: PairingAgentMethod, _ call: DBusMessage, _ reply: any PairingAgentReply, bluez: String?,
        device: (DBusObjectPath) -> BluetoothAddress?, nextID: inout Int
    ) -> [PairingAgentEvent] {
        func reject(_ why: String) -> [PairingAgentEvent] {
            reply.fail(DBusError("org.bluez.Error.Rejected", why))
            return []
        }
        guard let question = method.question else { return reject("\(method.rawValue) asks nothing") }
        guard Self.fromBlueZ(call, bluez) else { return reject("not bluetoothd") }
        guard handler != nil, let path = call.arguments.first?.objectPath, let address = device(path) else {
            return reject("unknown device")
        }
        guard !pending.values.contains(where: { $0.address == address }) else {
            return reject("a question about \(address) is waiting already")
        }
        guard pending.count < Self.maxPending else { return reject("too many questions waiting") }
        let passkey = call.arguments.count > 1 ? call.arguments[1].uint32 : nil
        // SMP's passkeys have six digits; a larger one is not bluetoothd's to ask about.
        guard passkey.map({ $0 <= Self.maxPasskey }) ?? true else { return reject("passkey out of range") }
        nextID += 1
        let id = nextID
        pending[id] = Pending(address: address, method: question, reply: reply)
        let service = method == .authorizeService && call.arguments.count > 1 ? call.arguments[1].string : nil
        return [
            .question(
                PairingQuestion(
                    id: id, address: address, method: question, passkey: passkey, service: service,
                    pairingHere: pairingNow[address] != nil))
        ]
    }

    /// Answers question `id`; false when it is not waiting (answered, timed out or cancelled
    /// already), and then nothing is sent. A passkey answers only a passkey entry, accept and
    /// reject anything but it (a mismatched answer is sent as a rejection).
    package mutating func answer(_ id: Int, _ answer: PairingAnswer) -> Bool {
        guard let pending = pending.removeValue(forKey: id) else { return false }
        switch (answer, pending.method) {
        case (.passkey(let passkey), .passkeyEntry) where passkey <= Self.maxPasskey:
            pending.reply.succeed([.uint32(passkey)])
        case (.accept, .numericComparison), (.accept, .authorization): pending.reply.succeed([])
        case (.cancel, _): pending.reply.fail(Self.canceled)
        default: pending.reply.fail(DBusError("org.bluez.Error.Rejected", "rejected"))
        }
        return true
    }

    /// Stops handing questions to the handler: what waits is refused (`Canceled`), and every
    /// later question too, until a handler is set again.
    package mutating func stop() {
        handler = nil
        for entry in pending.values { entry.reply.fail(Self.canceled) }
        pending.removeAll()
    }

    /// bluetoothd left: its questions are void (their replies have nowhere to go), and the agent
    /// is to be registered again when it is back. Returns the cancellations for the handler.
    package mutating func lost() -> [PairingAgentEvent] {
        registered = false
        let ids = pending.keys.sorted()
        pending.removeAll()
        return ids.map { .cancelled($0) }
    }

    /// Calls from anyone but bluetoothd are not the agent's business.
    static func fromBlueZ(_ call: DBusMessage, _ bluez: String?) -> Bool { call.sender != nil && call.sender == bluez }

    /// `DisplayPasskey`: told once per pairing (its later calls count the digits typed); a
    /// passkey of more than six digits is not shown.
    private mutating func display(
        _ call: DBusMessage, bluez: String?, device: (DBusObjectPath) -> BluetoothAddress?, nextID: inout Int
    ) -> [PairingAgentEvent] {
        guard Self.fromBlueZ(call, bluez), handler != nil, let path = call.arguments.first?.objectPath,
            let address = device(path), call.arguments.count == 3, let passkey = call.arguments[1].uint32,
            passkey <= Self.maxPasskey, call.arguments[2].uint16 == 0
        else { return [] }
        nextID += 1
        return [
            .question(
                PairingQuestion(
                    id: nextID, address: address, method: .passkeyDisplay, passkey: passkey,
                    pairingHere: pairingNow[address] != nil))
        ]
    }

    /// `Cancel`: bluetoothd stopped waiting for the question it asked.
    private mutating func cancelQuestions() -> [PairingAgentEvent] {
        let ids = pending.keys.sorted()
        for id in ids { pending.removeValue(forKey: id)?.reply.fail(Self.canceled) }
        return ids.map { .cancelled($0) }
    }
}
