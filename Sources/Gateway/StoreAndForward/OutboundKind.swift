/// How a message is treated while the broker is unreachable (docs/operations.md).
enum OutboundKind: Sendable {
    /// Queued and replayed in order with its capture time: device states and attribute
    /// topics, events, command responses, discovery removals.
    case stored
    /// Retained state the gateway republishes after every reconnect (bridge topics,
    /// availability, discovery configs): not queued while offline — the republish supersedes it.
    case republished
    /// A periodic snapshot (`bridge/health`): not queued while offline.
    case snapshot
}
