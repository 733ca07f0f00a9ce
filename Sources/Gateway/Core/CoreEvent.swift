import Bluetooth

/// An input of the gateway core. Every input is an event handled to completion, one at a time,
/// on the event loop's thread (docs/architecture.md): what the ports deliver, the timer, and the
/// completions of the core's own jobs.
enum CoreEvent: Sendable {
    /// An advertisement report of the scan.
    case advertisement(BLEDiscovery)
    /// A value of a subscribed characteristic: `subscribe[spec]` of the device's rule, with the
    /// link's ATT MTU when known (NotificationCut).
    case notification(BluetoothAddress, spec: Int, value: [UInt8], mtu: Int?)
    /// A link came up or went down.
    case link(BLEConnectionEvent)
    /// A message on a command topic (or the Home Assistant status topic).
    case command(MQTTInboundMessage)
    /// A message on a peripheral `from_topic`.
    case peripheralSource(MQTTInboundMessage)
    /// The MQTT connection came up (true) or was lost (false).
    case mqttConnection(Bool)
    /// A central wrote to or (un)subscribed from a served characteristic.
    case peripheral(PeripheralPortEvent)
    /// The pairing agent asked a question or withdrew one.
    case pairing(BLEPairingEvent)
    /// The gateway's timer: something is due.
    case timer
    /// A job finished.
    case completed(JobCompletion)
    /// The MQTT port reported a store-and-forward replay batch: delivered or not, per message.
    case replayed([Bool])
    /// The MQTT port reported done (acknowledged, or failed for good) a stored message the
    /// store-and-forward stage handed over live: its sequence.
    case liveCompleted(UInt64)
    /// A second after a replay batch failed.
    case replayRetry
    /// Time to try the store-and-forward queue file again after it could not be written.
    case queueFileRetry
}
