import BlueZ
import Bluetooth
import DBus
import Synchronization

extension FuzzTargets {
    /// `org.bluez.Agent1` calls to the central's pairing agent: what bluetoothd (or anyone else on
    /// the bus) sends, with answers from the gateway, cancellations, restarts of bluetoothd,
    /// devices that come and go, and the agent stopped and started. See ``AgentCallsFuzz``.
    static let agentCalls = FuzzTarget(
        name: "agent-calls",
        summary:
            "org.bluez.Agent1 calls (any method name, arguments and sender) into the pairing agent, with answers and cancellations",
        seeds: { AgentCallsFuzz.seeds },
        run: { AgentCallsFuzz.run($0) })
}

/// The driver of ``FuzzTargets/agentCalls``: the agent's state (``PairingAgentState``, what
/// ``CentralManager`` keeps) handed the calls as the connection hands them over — the method
/// looked up by name in the agent's table (``PairingAgentMethod``), the arguments checked against
/// its input signature (``DBusValue/check(_:against:)``, what the connection runs first), then
/// `called` or `asked` as the exported interface does — with device paths resolved through a
/// ``BlueZObjectTree`` as the manager's own.
///
/// Encoding: up to 48 operations, each an op byte: a call (0–2: method name, sender, arguments),
/// an answer (3), the agent started or stopped (4), bluetoothd gone or back (5), a device object
/// added or removed (6), a pairing of this process begun or ended (7).
///
/// Properties: no trap; a question only from bluetoothd (the owner of `org.bluez` now), while the
/// agent is started, about a device the object tree has at the path the call names, with the
/// address it has there; at most one question waiting per device and ``PairingAgentState/maxPending``
/// in all; question ids never repeat; a passkey shown or compared within 0–999999; every reply
/// completed at most once — a refused question at once with `Rejected`, a waiting one only by its
/// answer, a `Cancel` from bluetoothd or the agent's stop (both `Canceled`); an answer goes through
/// only for a waiting question, a passkey only to a passkey entry and within 0–999999, an accept
/// only to a comparison or authorization; a legacy PIN call is refused; calls from anyone else
/// change nothing; and at the end, once the agent stops, every reply that was not voided by
/// bluetoothd leaving is completed.
enum AgentCallsFuzz {
    /// A deferred reply: what the agent completed it with.
    final class Reply: PairingAgentReply {
        let results = Mutex<[Result<[DBusValue], DBusError>]>([])
        func succeed(_ values: [DBusValue]) { results.withLock { $0.append(.success(values)) } }
        func fail(_ error: DBusError) { results.withLock { $0.append(.failure(error)) } }
        var all: [Result<[DBusValue], DBusError>] { results.withLock { $0 } }
    }

    /// A question the handler was told about and that waits for its answer.
    struct Open {
        let address: BluetoothAddress
        let method: PairingMethod
        let reply: Reply
    }

    static let devices: [(path: String, address: String)] = [
        ("/org/bluez/hci0/dev_A4_C1_38_00_00_0A", "A4:C1:38:00:00:0A"),
        ("/org/bluez/hci0/dev_A4_C1_38_00_00_0B", "A4:C1:38:00:00:0B"),
        ("/org/bluez/hci1/dev_A4_C1_38_00_00_0A", "A4:C1:38:00:00:0A"),
        // The object's Address disagrees with its path: the agent goes by the object.
        ("/org/bluez/hci0/dev_A4_C1_38_00_00_0C", "A4:C1:38:00:00:0D"),
        // No Address that parses: not a device the agent may ask about.
        ("/org/bluez/hci0/dev_A4_C1_38_00_00_0E", "A4:C1:38:00:00"),
    ]

    static let names: [String] =
        PairingAgentMethod.allCases.map(\.rawValue) + [
            "requestpasskey", "RequestPasskey ", "", "Introspect", "Get", "RequestPinCode\u{0}", "AuthorizeServices",
        ]

    static let passkeys: [UInt32] = [0, 1, 4711, 654_321, 999_999, 1_000_000, 9_999_999, UInt32.max]

    /// The run's state: the agent, the world around it, and what the handler was told.
    struct World {
        var agent = PairingAgentState()
        var tree = BlueZObjectTree()
        var bluez: String? = ":1.1"
        var formerBlueZ: [String] = []
        var restarts = 1
        var nextID = 0
        var lastQuestionID = 0
        var open: [Int: Open] = [:]
        /// Every deferred reply made, and whether bluetoothd's leaving voided it.
        var replies: [(reply: Reply, voided: Bool)] = []

    }

    static func run(_ bytes: [UInt8]) {
        var input = FuzzInput(bytes)
        var world = World()
        world.agent.handler = { _ in }
        world.agent.registered = true
        var operations = 0
        while !input.isEmpty, operations < 48 {
            operations += 1
            switch input.byte() % 8 {
            case 0, 1, 2: call(&input, &world)
            case 3: answer(&input, &world)
            case 4:
                if input.bool() {
                    world.agent.handler = { _ in }
                } else {
                    stop(&world)
                }
            case 5:
                if world.bluez != nil, input.bool() {
                    let cancelled = world.agent.lost()
                    let ids = world.open.keys.sorted()
                    fuzzProperty(
                        cancelled == ids.map { .cancelled($0) }, "bluetoothd left: told \(cancelled), waiting \(ids)")
                    for id in ids {
                        if let index = world.replies.firstIndex(where: { $0.reply === world.open[id]?.reply }) {
                            world.replies[index].voided = true
                        }
                    }
                    world.open = [:]
                    world.formerBlueZ += world.bluez.map { [$0] } ?? []
                    world.bluez = nil
                } else if world.bluez == nil {
                    // Back: the manager registers the agent again.
                    world.restarts += 1
                    world.bluez = ":1.\(world.restarts)"
                    world.agent.registered = true
                }
            case 6:
                let device = input.pick(devices)
                let path = DBusObjectPath(rawValue: device.path) ?? .root
                if input.bool() {
                    let properties = DBusValue.dictionary(
                        key: .string, value: .variant,
                        [DBusDictionaryEntry(.string("Address"), .variant(.string(device.address)))])
                    _ = world.tree.add(
                        path,
                        interfaces: .dictionary(
                            key: .string, value: .dictionary(key: .string, value: .variant),
                            [DBusDictionaryEntry(.string("org.bluez.Device1"), properties)]))
                } else {
                    world.tree.remove(path, interfaces: ["org.bluez.Device1"])
                }
            default:
                let address = BluetoothAddress(input.pick(devices).address) ?? BluetoothAddress(rawValue: 0)
                if input.bool() {
                    world.agent.pairingNow[address, default: 0] += 1
                } else if let count = world.agent.pairingNow[address] {
                    world.agent.pairingNow[address] = count > 1 ? count - 1 : nil
                }
            }
            checkWaiting(world)
        }
        stop(&world)
        for (index, entry) in world.replies.enumerated() where !entry.voided {
            fuzzProperty(entry.reply.all.count == 1, "reply \(index) completed \(entry.reply.all.count) times")
        }
    }

    /// An Agent1 call, as the connection dispatches it.
    static func call(_ input: inout FuzzInput, _ world: inout World) {
        let choice = input.index(names.count + 1)
        let name = choice < names.count ? names[choice] : input.string(limit: 30)
        let strangers = [":1.99", ""] + world.formerBlueZ.suffix(1)
        let sender: String? =
            switch input.byte() % 4 {
            case 0, 1: world.bluez
            case 2: input.pick(strangers)
            default: nil
            }
        let method = PairingAgentMethod(rawValue: name)
        let arguments = Self.arguments(for: method, &input, world)
        let message = DBusMessage(
            kind: .methodCall, sender: sender, path: CentralManager.agentPath, interface: "org.bluez.Agent1",
            member: name, arguments: arguments)
        // The connection: an unknown method or arguments of other types never reach the agent.
        guard let method, (try? DBusValue.check(arguments, against: method.input)) != nil else { return }
        let fromBlueZ = sender != nil && sender == world.bluez
        let started = world.agent.handler != nil
        let path = arguments.first?.objectPath
        let known = path.flatMap { world.tree.device($0)?.address }
        let registered = world.agent.registered
        let before = world.open
        let tree = world.tree
        var nextID = world.nextID
        defer { world.nextID = nextID }
        if method.question != nil {
            let reply = Reply()
            world.replies.append((reply, false))
            let events = world.agent.asked(
                method, message, reply, bluez: world.bluez, device: { tree.device($0)?.address }, nextID: &nextID)
            guard let event = events.first else {
                fuzzProperty(reply.all.count == 1, "a question neither asked nor refused: \(message)")
                fuzzProperty(rejected(reply.all.first), "a question refused with \(reply.all)")
                let passkey = arguments.count > 1 ? arguments[1].uint32 : nil
                fuzzProperty(
                    !fromBlueZ || !started
                        || known.map { address in before.values.contains { $0.address == address } }
                            ?? true
                        || before.count >= PairingAgentState.maxPending || passkey.map { $0 > 999_999 } == true,
                    "bluetoothd's question about \(known.map { "\($0)" } ?? "?") refused: \(reply.all)")
                return
            }
            fuzzProperty(events.count == 1, "one call, \(events.count) events")
            fuzzProperty(reply.all.isEmpty, "a question asked and answered already: \(reply.all)")
            guard case .question(let question) = event else {
                return fuzzProperty(false, "a call told \(event)")
            }
            fuzzProperty(fromBlueZ, "a question from \(sender ?? "nobody"), bluetoothd is \(world.bluez ?? "gone")")
            fuzzProperty(started, "a question while the agent is stopped")
            fuzzProperty(
                known == question.address,
                "a question about \(question.address); the call names \(path.map { "\($0)" } ?? "no path")")
            fuzzProperty(
                !before.values.contains { $0.address == question.address },
                "a second question about \(question.address)")
            fuzzProperty(before.count < PairingAgentState.maxPending, "a question beyond \(before.count) waiting")
            fuzzProperty(question.method == method.question, "\(method.rawValue) asked \(question.method)")
            checkPasskey(question, method == .requestConfirmation)
            fuzzProperty(
                question.service == (method == .authorizeService ? arguments[1].string : nil),
                "service \(question.service ?? "nil")")
            asked(question, &world)
            world.open[question.id] = Open(address: question.address, method: question.method, reply: reply)
            return
        }
        let events: [PairingAgentEvent]
        do {
            events = try world.agent.called(
                method, message, bluez: world.bluez, device: { tree.device($0)?.address }, nextID: &nextID)
        } catch {
            fuzzProperty(
                method == .requestPinCode || method == .displayPinCode, "\(method.rawValue) refused: \(error)")
            fuzzProperty(world.open.count == before.count, "a refused call changed the questions")
            return
        }
        fuzzProperty(
            method != .requestPinCode && method != .displayPinCode, "a legacy PIN call (\(method.rawValue)) answered")
        switch method {
        case .cancel where fromBlueZ:
            let ids = before.keys.sorted()
            fuzzProperty(events == ids.map { .cancelled($0) }, "Cancel told \(events), waiting \(ids)")
            for (id, entry) in before {
                fuzzProperty(
                    entry.reply.all.count == 1 && canceled(entry.reply.all.first),
                    "question \(id) cancelled with \(entry.reply.all)")
            }
            world.open = [:]
        case .displayPasskey:
            fuzzProperty(events.count <= 1, "DisplayPasskey told \(events)")
            guard case .question(let question)? = events.first else { break }
            fuzzProperty(fromBlueZ && started, "a passkey shown for \(sender ?? "nobody")")
            fuzzProperty(known == question.address, "a passkey shown for \(question.address), not the call's device")
            fuzzProperty(question.method == .passkeyDisplay, "DisplayPasskey asked \(question.method)")
            fuzzProperty(arguments[2].uint16 == 0, "a passkey shown again for a digit typed")
            checkPasskey(question, true)
            asked(question, &world)
        default:
            fuzzProperty(events.isEmpty, "\(method.rawValue) from \(sender ?? "nobody") told \(events)")
            if method == .release {
                fuzzProperty(
                    world.agent.registered == (registered && !fromBlueZ), "Release from \(sender ?? "nobody")")
            }
        }
        if !(method == .cancel && fromBlueZ) {
            fuzzProperty(
                world.agent.waiting == before.mapValues(\.address), "\(method.rawValue) changed the questions")
        }
        for entry in world.open.values where !entry.reply.all.isEmpty {
            fuzzProperty(false, "a waiting question's reply completed by \(method.rawValue): \(entry.reply.all)")
        }
    }

    /// A question was told: a new id, whether a pairing of this process asked.
    static func asked(_ question: PairingQuestion, _ world: inout World) {
        fuzzProperty(question.id > world.lastQuestionID, "question id \(question.id) after \(world.lastQuestionID)")
        world.lastQuestionID = question.id
        fuzzProperty(
            question.pairingHere == (world.agent.pairingNow[question.address] != nil),
            "pairingHere \(question.pairingHere) for \(question.address)")
    }

    /// A passkey to show or compare is one of six digits.
    static func checkPasskey(_ question: PairingQuestion, _ expected: Bool) {
        if expected {
            fuzzProperty(
                question.passkey.map { $0 <= 999_999 } == true,
                "\(question.method) with passkey \(question.passkey.map { "\($0)" } ?? "none")")
        } else {
            fuzzProperty(question.passkey == nil, "\(question.method) with a passkey")
        }
    }

    /// The gateway answers (a waiting question, one answered or withdrawn, or any id).
    static func answer(_ input: inout FuzzInput, _ world: inout World) {
        let ids = world.open.keys.sorted()
        let id = !ids.isEmpty && input.byte() % 4 != 0 ? ids[input.index(ids.count)] : Int(input.byte()) - 8
        let answer: PairingAnswer =
            switch input.byte() % 5 {
            case 0, 1: .passkey(input.bool() ? input.pick(passkeys) : input.uint32())
            case 2: .accept
            case 3: .reject
            default: .cancel
            }
        let before = world.open
        let sent = world.agent.answer(id, answer)
        guard let entry = before[id] else {
            fuzzProperty(!sent, "an answer to question \(id), which does not wait, went through")
            fuzzProperty(
                world.agent.waiting == before.mapValues(\.address), "an answer to nothing changed the questions")
            return
        }
        fuzzProperty(sent, "an answer to waiting question \(id) was not sent")
        world.open[id] = nil
        let results = entry.reply.all
        fuzzProperty(results.count == 1, "question \(id) answered \(results.count) times")
        switch (answer, entry.method, results.first) {
        case (.passkey(let passkey), .passkeyEntry, .success(let values)?):
            fuzzProperty(passkey <= 999_999, "passkey \(passkey) sent")
            fuzzProperty(values == [.uint32(passkey)], "passkey \(passkey) sent as \(values)")
        case (.accept, .numericComparison, .success(let values)?), (.accept, .authorization, .success(let values)?):
            fuzzProperty(values.isEmpty, "accept sent as \(values)")
        case (_, _, .success(let values)?):
            fuzzProperty(false, "\(answer) to \(entry.method) sent as a success \(values)")
        case (.cancel, _, let result):
            fuzzProperty(canceled(result), "cancel sent as \(String(describing: result))")
        case (.passkey(let passkey), .passkeyEntry, let result):
            fuzzProperty(
                passkey > 999_999 && rejected(result), "passkey \(passkey) not sent: \(String(describing: result))")
        case (.accept, .numericComparison, let result), (.accept, .authorization, let result):
            fuzzProperty(false, "accept to \(entry.method) not sent: \(String(describing: result))")
        case (_, _, let result):
            fuzzProperty(rejected(result), "\(answer) to \(entry.method) sent as \(String(describing: result))")
        }
    }

    /// The agent stops: what waits is refused `Canceled`.
    static func stop(_ world: inout World) {
        world.agent.stop()
        for (id, entry) in world.open {
            fuzzProperty(
                entry.reply.all.count == 1 && canceled(entry.reply.all.first),
                "question \(id) at stop: \(entry.reply.all)")
        }
        world.open = [:]
        fuzzProperty(world.agent.waiting.isEmpty, "questions wait after the stop")
    }

    /// The agent's waiting questions are the ones the handler was told about and not settled.
    static func checkWaiting(_ world: World) {
        let waiting = world.agent.waiting
        fuzzProperty(waiting == world.open.mapValues(\.address), "waiting \(waiting), told \(world.open.keys.sorted())")
        fuzzProperty(waiting.count <= PairingAgentState.maxPending, "\(waiting.count) questions wait")
        fuzzProperty(Set(waiting.values).count == waiting.count, "two questions wait for one device")
        fuzzProperty(waiting.isEmpty || world.agent.handler != nil, "questions wait while the agent is stopped")
    }

    static func rejected(_ result: Result<[DBusValue], DBusError>?) -> Bool {
        if case .failure(let error)? = result { return error.name.rawValue == "org.bluez.Error.Rejected" }
        return false
    }

    static func canceled(_ result: Result<[DBusValue], DBusError>?) -> Bool {
        if case .failure(let error)? = result { return error.name.rawValue == "org.bluez.Error.Canceled" }
        return false
    }

    /// A call's arguments: mostly of the method's signature (a device path of the tree's or any
    /// path, a passkey in or out of range, a count of digits typed), else any values.
    static func arguments(for method: PairingAgentMethod?, _ input: inout FuzzInput, _ world: World) -> [DBusValue] {
        guard let method, input.byte() % 8 != 0 else {
            return (0..<(input.byte() % 4)).map { _ in DBusValueGenerator.any(&input, depth: 1) }
        }
        var values: [DBusValue] = []
        for (index, type) in method.input.types.enumerated() {
            switch type {
            case .objectPath:
                let path =
                    input.bool()
                    ? DBusObjectPath(rawValue: input.pick(devices).path) ?? .root : DBusValueGenerator.path(&input)
                values.append(.objectPath(path))
            case .uint32: values.append(.uint32(input.bool() ? input.pick(passkeys) : input.uint32()))
            case .uint16: values.append(.uint16(input.bool() ? 0 : UInt16(input.byte() % 8)))
            case .string:
                values.append(
                    .string(
                        index == 1 && input.bool()
                            ? "0000180f-0000-1000-8000-00805f9b34fb" : DBusValueGenerator.string(&input)))
            default: values.append(DBusValueGenerator.value(type, &input, depth: 1))
            }
        }
        // A value too many or too few: the connection refuses it.
        switch input.byte() % 16 {
        case 0: values.append(.uint32(1))
        case 1: values = Array(values.dropLast())
        default: break
        }
        return values
    }

    static var seeds: [[UInt8]] {
        var seeds: [[UInt8]] = []
        func seed(_ build: (inout FuzzInputBuilder) -> Void) {
            var builder = FuzzInputBuilder()
            build(&builder)
            seeds.append(builder.bytes)
        }
        /// Adds device `index` to the tree.
        func add(_ builder: inout FuzzInputBuilder, _ index: Int) {
            builder.byte(6)
            builder.index(index)
            builder.bool(true)
        }
        /// A call of `name` from bluetoothd about device `index`, then the method's other
        /// arguments as `rest` encodes them (after the path: bool true, the device's index).
        func call(
            _ builder: inout FuzzInputBuilder, _ name: String, device: Int, sender: UInt8 = 0, _ rest: [UInt8] = []
        ) {
            builder.byte(0)
            builder.index(names.firstIndex(of: name) ?? 0)
            builder.byte(sender)
            builder.byte(1)  // the method's own signature
            builder.bool(true)
            builder.index(device)
            builder.rest(rest)
            builder.byte(2)  // no value too many or too few
        }
        // Passkey entry, answered with the passkey.
        seed { b in
            add(&b, 0)
            call(&b, "RequestPasskey", device: 0)
            b.byte(3)
            b.byte(1)
            b.index(0)
            b.byte(0)
            b.bool(true)
            b.index(3)
        }
        // Numeric comparison, cancelled by bluetoothd, then a late accept.
        seed { b in
            add(&b, 1)
            call(&b, "RequestConfirmation", device: 1, [1, 2, 0])
            call(&b, "Cancel", device: 0)
            b.byte(3)
            b.byte(0)
            b.byte(2)
        }
        // Authorization of a service from a stranger, then from bluetoothd, then accepted.
        seed { b in
            add(&b, 0)
            call(&b, "AuthorizeService", device: 0, sender: 2, [1])
            call(&b, "AuthorizeService", device: 0, [1])
            b.byte(3)
            b.byte(1)
            b.index(0)
            b.byte(2)
        }
        // A passkey shown, a second question for one device, bluetoothd restarts, Release.
        seed { b in
            add(&b, 0)
            add(&b, 2)
            b.byte(7)
            b.index(0)
            b.bool(true)
            call(&b, "DisplayPasskey", device: 0, [1, 3, 0, 1])
            call(&b, "RequestPasskey", device: 0)
            call(&b, "RequestAuthorization", device: 2)
            b.byte(5)
            b.bool(true)
            b.byte(5)
            call(&b, "Release", device: 0)
            call(&b, "RequestPinCode", device: 0)
        }
        return seeds
    }
}
