import Bluetooth
import JSON

/// One unit of work in a device's serial queue: a command, a `/get`, a poll or a raw GATT request.
struct DeviceJob: Sendable {
    enum Kind: Sendable {
        /// `/set`: the writes of one message, in order.
        case write([PlannedWrite])
        /// `/get`: read these configured characteristics and republish the state.
        case read([CharacteristicRef])
        /// A scheduled read of `poll[index]`.
        case poll(Int)
        /// `bridge/request/gatt/read`.
        case rawRead(service: BluetoothUUID?, characteristic: BluetoothUUID)
        /// `bridge/request/gatt/write`.
        case rawWrite(service: BluetoothUUID?, characteristic: BluetoothUUID, value: [UInt8], withResponse: Bool)
    }

    var kind: Kind
    /// Monotonic time the message arrived.
    var receivedAt: Double
    /// Refused as `expired` when not started by then.
    var expiresAt: Double?
    /// Where the one response goes; nil for polls.
    var reply: CommandReply?
}

/// A validated command write: the bytes are already encoded, so nothing is written unless the
/// whole message was valid.
struct PlannedWrite: Sendable {
    var command: CommandSpec
    var bytes: [UInt8]
    /// A template command's value whose bytes read the gateway's clock (no `timestamp` given):
    /// encoded again when the write runs, so a clock gets the time of the write, not the time
    /// the request came (a connect on demand and the queue take seconds).
    var clockValue: JSONValue? = nil
}

/// A configured `subscribe` or `poll` entry of a device rule.
struct CharacteristicRef: Sendable, Equatable {
    var poll: Bool
    var index: Int
}
