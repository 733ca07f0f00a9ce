import BlueZ
import Bluetooth
import DBus
import Synchronization
import Testing

/// The pairing agent's decisions without a bus (``PairingAgentState``): what the `agent-calls`
/// fuzz target found, and what the D-Bus tests (AgentTests) cannot send, since the simulator
/// asks as bluetoothd does.
@Suite("Pairing agent: decisions")
struct PairingAgentStateTests {
    final class Reply: PairingAgentReply {
        let results = Mutex<[Result<[DBusValue], DBusError>]>([])
        func succeed(_ values: [DBusValue]) { results.withLock { $0.append(.success(values)) } }
        func fail(_ error: DBusError) { results.withLock { $0.append(.failure(error)) } }
        /// Each completion: "ok", or the error's name.
        var completions: [String] {
            results.withLock {
                $0.map {
                    switch $0 {
                    case .success: "ok"
                    case .failure(let error): error.name.rawValue
                    }
                }
            }
        }
    }

    static let bluez = ":1.7"
    static let path: DBusObjectPath = "/org/bluez/hci0/dev_A4_C1_38_00_00_0A"
    static let address = BluetoothAddress("A4:C1:38:00:00:0A")

    static func call(_ method: PairingAgentMethod, _ arguments: [DBusValue], from sender: String? = bluez)
        -> DBusMessage
    {
        DBusMessage(kind: .methodCall, sender: sender, member: method.rawValue, arguments: arguments)
    }

    static func started() -> PairingAgentState {
        var agent = PairingAgentState()
        agent.handler = { _ in }
        return agent
    }

    static func device(_ path: DBusObjectPath) -> BluetoothAddress? { path == Self.path ? address : nil }

    @Test("a comparison of more than six digits is refused; six digits are asked")
    func confirmationPasskeyRange() throws {
        var agent = Self.started()
        var nextID = 0
        let tooLong = Reply()
        let refused = agent.asked(
            .requestConfirmation, Self.call(.requestConfirmation, [.objectPath(Self.path), .uint32(1_000_000)]),
            tooLong, bluez: Self.bluez, device: Self.device, nextID: &nextID)
        #expect(refused.isEmpty)
        #expect(tooLong.completions == ["org.bluez.Error.Rejected"])
        #expect(agent.waiting.isEmpty)

        let sixDigits = Reply()
        let asked = agent.asked(
            .requestConfirmation, Self.call(.requestConfirmation, [.objectPath(Self.path), .uint32(999_999)]),
            sixDigits, bluez: Self.bluez, device: Self.device, nextID: &nextID)
        guard case .question(let question)? = asked.first else {
            Issue.record("no question: \(asked)")
            return
        }
        #expect(question.passkey == 999_999)
        #expect(question.method == .numericComparison)
        #expect(sixDigits.completions.isEmpty)
        let answered = agent.answer(question.id, .accept)
        #expect(answered)
        #expect(sixDigits.completions == ["ok"])
    }

    @Test("a passkey of more than six digits is not shown")
    func displayPasskeyRange() throws {
        var agent = Self.started()
        var nextID = 0
        let shown = try agent.called(
            .displayPasskey, Self.call(.displayPasskey, [.objectPath(Self.path), .uint32(4_294_967_295), .uint16(0)]),
            bluez: Self.bluez, device: Self.device, nextID: &nextID)
        #expect(shown.isEmpty)
        let six = try agent.called(
            .displayPasskey, Self.call(.displayPasskey, [.objectPath(Self.path), .uint32(123_456), .uint16(0)]),
            bluez: Self.bluez, device: Self.device, nextID: &nextID)
        #expect(six.count == 1)
    }

    @Test("Cancel from a stranger changes nothing; from bluetoothd it withdraws what waits")
    func cancel() throws {
        var agent = Self.started()
        var nextID = 0
        let reply = Reply()
        _ = agent.asked(
            .requestPasskey, Self.call(.requestPasskey, [.objectPath(Self.path)]), reply, bluez: Self.bluez,
            device: Self.device, nextID: &nextID)
        #expect(agent.waiting.count == 1)
        let stranger = try agent.called(
            .cancel, Self.call(.cancel, [], from: ":1.99"), bluez: Self.bluez, device: Self.device, nextID: &nextID)
        #expect(stranger.isEmpty)
        #expect(agent.waiting.count == 1)
        #expect(reply.completions.isEmpty)
        let cancelled = try agent.called(
            .cancel, Self.call(.cancel, []), bluez: Self.bluez, device: Self.device, nextID: &nextID)
        #expect(cancelled == [.cancelled(1)])
        #expect(agent.waiting.isEmpty)
        #expect(reply.completions == ["org.bluez.Error.Canceled"])
    }
}
