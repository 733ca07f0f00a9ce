import Bluetooth
import JSON

/// Pairing beyond Just Works (docs/config.md, "Pairing"): the questions of the central's pairing
/// agent go to `bridge/event` as `pairing_request` and wait for their answer on
/// `bridge/request/device/pair/confirm`, at most `bluetooth.pairing_timeout`; `device/pair` and
/// `device/unpair` pair and unpair a device a rule names. Only a device a rule's `match.address`
/// names may be paired, unpaired or asked about — or one a pairing of this process (the
/// Bluetooth proxy's) is pairing. At most one question per device waits, and at most
/// ``maxWaiting`` in all; an answer without a waiting question is refused, nothing sent.
/// Loop-confined.
final class PairingRequests {
    /// A question waiting for its answer.
    struct Waiting {
        let question: BLEPairingQuestion
        let name: String
        let deadline: Double
    }

    /// At most this many questions wait at once.
    static let maxWaiting = 8
    /// At most this many pair and unpair requests run at once.
    static let maxRunning = 8

    private let context: CoreContext
    private let registry: DeviceRegistry
    /// Waiting questions by device.
    private(set) var waiting: [BluetoothAddress: Waiting] = [:]
    /// Pair (false) and unpair (true) requests running, by device.
    private var running: [BluetoothAddress: (request: BridgeRequest, unpair: Bool)] = [:]

    init(context: CoreContext, registry: DeviceRegistry) {
        self.context = context
        self.registry = registry
    }

    private var log: GatewayLogger { context.log }

    /// The rule whose `match.address` lists `address` (nil: no rule names it).
    private func namingRule(_ address: BluetoothAddress) -> Int? {
        context.config.devices.firstIndex { $0.match.addresses.contains(address) }
    }

    /// The device's name on MQTT: the registered device's, else its rule's, else the address's.
    private func name(of address: BluetoothAddress) -> String {
        if let id = registry.id(address) { return registry[id].name }
        if let index = namingRule(address), let name = context.rule(index).name,
            context.rule(index).match.addresses.count == 1
        {
            return name
        }
        return DeviceRecord.defaultName(address)
    }

    // MARK: Questions

    /// The agent asked or withdrew a question.
    func event(_ event: BLEPairingEvent, now: Double) {
        switch event {
        case .question(let question): asked(question, now: now)
        case .cancelled(let id):
            guard let (address, entry) = waiting.first(where: { $0.value.question.id == id }) else { return }
            waiting.removeValue(forKey: address)
            log(.info, "\(entry.name) (\(address)): bluetoothd withdrew its pairing question")
            publish("pairing_cancelled", entry.name, address, [])
        }
    }

    private func asked(_ question: BLEPairingQuestion, now: Double) {
        let address = question.address
        let what = question.method.rawValue
        guard question.pairingHere || namingRule(address) != nil else {
            context.counters.dropped.pairingRefused += 1
            log(.warning, "pairing question (\(what)) about \(address) refused: no device rule names it")
            // A passkey to show is owed no answer: it is just not shown.
            return question.method == .passkeyDisplay ? () : question.answer(.reject)
        }
        let name = name(of: address)
        var data: [(key: String, value: JSONValue)] = [("method", .string(what))]
        if let passkey = question.passkey { data.append(("passkey", .number(Double(passkey)))) }
        if let service = question.service { data.append(("service", .string(service))) }
        if question.method == .passkeyDisplay {
            // Nothing to answer: the peer's user types it.
            log(.notice, "\(name) (\(address)): pairing shows passkey \(Self.sixDigits(question.passkey ?? 0))")
            return publish("pairing_request", name, address, data)
        }
        guard waiting[address] == nil else {
            context.counters.dropped.pairingRefused += 1
            log(.warning, "\(name) (\(address)): second pairing question (\(what)) refused: one is waiting")
            return question.answer(.reject)
        }
        guard waiting.count < Self.maxWaiting else {
            context.counters.dropped.pairingRefused += 1
            log(.warning, "\(name) (\(address)): pairing question (\(what)) refused: \(Self.maxWaiting) are waiting")
            return question.answer(.reject)
        }
        let timeout = context.config.bluetooth.pairingTimeout
        waiting[address] = Waiting(question: question, name: name, deadline: now + timeout)
        context.due(at: now + timeout)
        data.append(("timeout", .number(timeout)))
        log(
            .notice,
            "\(name) (\(address)): pairing asks \(what)\(question.passkey.map { " \(Self.sixDigits($0))" } ?? ""); answer on \(context.bridge)/request/device/pair/confirm within \(timeout) s"
        )
        publish("pairing_request", name, address, data)
    }

    /// Questions not answered in time are refused (bluetoothd then fails the pairing).
    func tick(now: Double) {
        for (address, entry) in waiting where entry.deadline <= now {
            waiting.removeValue(forKey: address)
            entry.question.answer(.cancel)
            log(
                .warning,
                "\(entry.name) (\(address)): pairing question (\(entry.question.method.rawValue)) not answered on \(context.bridge)/request/device/pair/confirm within \(context.config.bluetooth.pairingTimeout) s: refused, the pairing fails"
            )
            publish("pairing_timeout", entry.name, address, [("method", .string(entry.question.method.rawValue))])
        }
    }

    var nextDeadline: Double? { waiting.values.map(\.deadline).min() }

    /// The gateway stops: what waits is refused.
    func stop() {
        for entry in waiting.values { entry.question.answer(.cancel) }
        waiting.removeAll()
    }

    // MARK: Requests

    /// The device a request's `device` names (a known device's name or address, a rule's
    /// friendly name, an address) when a rule's `match.address` names it; else the request is
    /// answered with an error and nil returned.
    private func namedDevice(_ request: BridgeRequest) -> BluetoothAddress? {
        guard case .string(let text)? = request.object["device"] else {
            request.respond(.error, "device: expected the name or address of a device a rule names")
            return nil
        }
        guard let address = registry.named(text)?.address ?? BluetoothAddress(text) else {
            request.respond(.error, "device: \"\(text)\" is no device a rule names")
            return nil
        }
        return address
    }

    /// `bridge/request/device/pair` and `…/unpair` `{"device"}`: pairs or unpairs a device a
    /// rule's `match.address` names; answered when the central is done.
    func pairRequest(_ request: BridgeRequest, unpair: Bool) {
        guard let address = namedDevice(request) else { return }
        guard namingRule(address) != nil else {
            context.counters.dropped.pairingRefused += 1
            return request.respond(
                .error, "\(address): no device rule names this address (match.address); only such devices are paired")
        }
        guard running[address] == nil else {
            return request.respond(.error, "\(name(of: address)): a pair or unpair request of it is running")
        }
        guard running.count < Self.maxRunning else {
            return request.respond(.error, "\(Self.maxRunning) pair or unpair requests are running; try again later")
        }
        running[address] = (request, unpair)
        let ble = context.ble
        // The question's wait, plus time for bluetoothd to connect and for the key exchange.
        let timeout = context.config.bluetooth.pairingTimeout + context.config.bluetooth.connectTimeout
        log(.notice, "\(name(of: address)) (\(address)): \(unpair ? "unpairing" : "pairing") on request")
        context.jobs.spawn {
            do throws(BLEPortError) {
                if unpair { try await ble.unpair(address) } else { try await ble.pair(address, timeout: timeout) }
                return .pairing(address, unpair: unpair, nil)
            } catch {
                return .pairing(address, unpair: unpair, error)
            }
        }
    }

    /// A pair or unpair job ended: its request is answered.
    func completed(_ address: BluetoothAddress, unpair: Bool, _ error: BLEPortError?) {
        guard let (request, _) = running.removeValue(forKey: address) else { return }
        let name = name(of: address)
        if let error {
            log(.warning, "\(name) (\(address)): \(unpair ? "unpair" : "pairing") failed: \(error)")
            return request.respond(.error, error.description)
        }
        log(.notice, "\(name) (\(address)): \(unpair ? "unpaired (bond removed)" : "paired and bonded")")
        request.respond(
            .ok,
            data: .object([
                ("name", .string(name)), ("address", .string(address.description)), ("paired", .bool(!unpair)),
            ]))
    }

    /// `bridge/request/device/pair/confirm` `{"device", "passkey": 0…999999}` or `{"device",
    /// "accept": true|false}`: answers the question waiting for the device. Refused, nothing
    /// sent: no question waiting, an answer of the wrong kind, a passkey out of range.
    func confirmRequest(_ request: BridgeRequest) {
        guard case .string(let text)? = request.object["device"] else {
            return request.respond(.error, "device: expected the name or address of the device asked about")
        }
        guard let address = registry.named(text)?.address ?? BluetoothAddress(text), let entry = waiting[address]
        else {
            context.counters.dropped.pairingRefused += 1
            return request.respond(.error, "no pairing question is waiting for \"\(text)\"")
        }
        let answer: PairingAnswer
        switch (entry.question.method, request.object["passkey"], request.object["accept"]) {
        case (.passkeyEntry, .number(let number)?, nil):
            guard number >= 0, number <= 999_999, number == number.rounded() else {
                return request.respond(.error, "passkey: expected a whole number from 0 to 999999")
            }
            answer = .passkey(UInt32(number))
        case (.passkeyEntry, _, _):
            return request.respond(
                .error, "\(entry.name) asks for a passkey: expected \"passkey\" (a whole number from 0 to 999999)")
        case (_, nil, .bool(let accept)?):
            answer = accept ? .accept : .reject
        default:
            return request.respond(
                .error,
                "\(entry.name) asks for \(entry.question.method.rawValue): expected \"accept\": true or false")
        }
        waiting.removeValue(forKey: address)
        entry.question.answer(answer)
        log(.notice, "\(entry.name) (\(address)): pairing question answered (\(Self.describe(answer)))")
        request.respond(
            .ok, data: .object([("name", .string(entry.name)), ("address", .string(address.description))]))
    }

    private static func describe(_ answer: PairingAnswer) -> String {
        switch answer {
        case .passkey: "passkey entered"
        case .accept: "accepted"
        case .reject: "rejected"
        case .cancel: "cancelled"
        }
    }

    static func sixDigits(_ passkey: UInt32) -> String {
        let digits = String(passkey)
        return String(repeating: "0", count: max(0, 6 - digits.count)) + digits
    }

    private func publish(
        _ type: String, _ name: String, _ address: BluetoothAddress, _ extra: [(key: String, value: JSONValue)]
    ) {
        let data: [(key: String, value: JSONValue)] =
            [("name", .string(name)), ("address", .string(address.description))] + extra
        context.output.publish(
            context.bridge + "/event", json: .object([("type", .string(type)), ("data", .object(data))]),
            retain: false)
    }
}
