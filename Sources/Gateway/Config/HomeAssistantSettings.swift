import JSON

/// `homeassistant` in config.json: Home Assistant MQTT discovery (docs/operations.md).
public struct HomeAssistantSettings: Sendable, Equatable {
    /// Publish discovery configs at all.
    public var enabled = true
    /// The first level of the config topics: `<prefix>/<component>/<node>/<object>/config`.
    public var discoveryPrefix = "homeassistant"
    /// Where Home Assistant announces itself; `online` there republishes every config.
    public var statusTopic = "homeassistant/status"
    /// Configs are republished after a random delay from 0 to this many seconds after
    /// `online`, so many gateways do not answer a restart of Home Assistant at once.
    public var republishDelay: Double = 5
    /// A device's state is held back this long after a new config of it (HA drops a state that
    /// arrives within ~0.1 s of a new config).
    public var stateDelay: Double = 1

    public init() {}

    init(_ object: inout ConfigObject) {
        enabled = object.read("enabled", default: enabled) { try $0.bool() }
        discoveryPrefix = object.read("discovery_prefix", default: discoveryPrefix) {
            try $0.topicPrefix("a topic prefix")
        }
        statusTopic = object.read("status_topic", default: discoveryPrefix + "/status") { try $0.topicName() }
        republishDelay = object.read("republish_delay", default: republishDelay) { try $0.duration() }
        stateDelay = object.read("state_delay", default: stateDelay) { try $0.duration() }
        object.finish()
    }
}
