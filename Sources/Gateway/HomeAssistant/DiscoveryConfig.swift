import JSON

/// One Home Assistant MQTT discovery config: published retained on
/// `<prefix>/<component>/<node>/<object>/config`, removed with an empty retained payload.
struct DiscoveryConfig: Sendable, Equatable {
    /// `sensor`, `binary_sensor`, `switch`, `number`, `button`, `select` or `text`.
    var component: String
    var topic: String
    var payload: JSONValue
}
