import Bluetooth
import Gateway
import Synchronization

/// The pairing side of ``CheckedBLE``: questions the fuzzed agent asks, and every answer the
/// gateway gives, checked as it is given (docs/config.md, "Pairing"): a question is answered at
/// most once; one about a device no rule's `match.address` names, that no pairing of the process
/// asked about, only with a refusal; a passkey only to a passkey entry and within 0–999999; an
/// accept only to a comparison or an authorization; anything but a refusal only after a
/// `pair/confirm` request came in after the question. `pair` and `unpair` reach the central
/// only for a device a rule's `match.address` names.
final class CheckedPairing: Sendable {
    struct Question: Sendable {
        let question: BLEPairingQuestion
        let allowed: Bool
        /// `confirms` when it was asked.
        let confirmsBefore: Int
        var answers: [PairingAnswer] = []
    }

    let named: Set<BluetoothAddress>
    private let state = Mutex<
        (deliver: (@Sendable (BLEPairingEvent) -> Void)?, questions: [Int: Question], confirms: Int)
    >(
        (nil, [:], 0))

    init(named: Set<BluetoothAddress>) { self.named = named }

    func register(_ deliver: @escaping @Sendable (BLEPairingEvent) -> Void) {
        state.withLock { $0.deliver = deliver }
    }

    /// A `bridge/request/device/pair/confirm` message is about to be handed to the gateway.
    func confirmSent() { state.withLock { $0.confirms += 1 } }

    /// The agent asks; delivered as bluetoothd's call would be.
    func ask(_ address: BluetoothAddress, method: PairingMethod, passkey: UInt32?, here: Bool) {
        let (id, deliver, confirms) = state.withLock { ($0.questions.count + 1, $0.deliver, $0.confirms) }
        guard let deliver else { return }
        let question = BLEPairingQuestion(
            id: id, address: address, method: method, passkey: passkey, pairingHere: here
        ) { [self] answer in answered(id, answer) }
        state.withLock {
            $0.questions[id] = Question(
                question: question, allowed: here || named.contains(address), confirmsBefore: confirms)
        }
        deliver(.question(question))
    }

    /// bluetoothd withdraws a question.
    func withdraw(_ id: Int) {
        guard let deliver = state.withLock({ $0.deliver }) else { return }
        deliver(.cancelled(id))
    }

    var questionCount: Int { state.withLock { $0.questions.count } }

    private func answered(_ id: Int, _ answer: PairingAnswer) {
        let (record, confirms) = state.withLock { state in
            state.questions[id]?.answers.append(answer)
            return (state.questions[id], state.confirms)
        }
        guard let record else { return fuzzProperty(false, "pairing: an answer to question \(id) never asked") }
        let method = record.question.method
        fuzzProperty(record.answers.count == 1, "pairing: question \(id) (\(method)) answered twice: \(record.answers)")
        fuzzProperty(method != .passkeyDisplay, "pairing: a passkey display (no answer owed) answered \(answer)")
        switch answer {
        case .reject, .cancel: return
        case .passkey(let passkey):
            fuzzProperty(method == .passkeyEntry, "pairing: a passkey answers \(method)")
            fuzzProperty(passkey <= 999_999, "pairing: passkey \(passkey) out of range")
        case .accept:
            fuzzProperty(method != .passkeyEntry, "pairing: accept answers a passkey entry")
        }
        fuzzProperty(
            record.allowed,
            "pairing: a question about \(record.question.address), which no rule names, answered \(answer)")
        fuzzProperty(
            confirms > record.confirmsBefore,
            "pairing: question \(id) answered \(answer) without a pair/confirm request after it")
    }

    /// A `pair` or `unpair` the gateway asked of the central.
    func pairing(_ address: BluetoothAddress, unpair: Bool) {
        fuzzProperty(
            named.contains(address), "pairing: \(unpair ? "unpair" : "pair") of \(address), which no rule names")
    }
}
