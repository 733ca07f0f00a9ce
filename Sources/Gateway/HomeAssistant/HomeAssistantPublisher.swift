import JSON

/// Home Assistant MQTT discovery: the bridge's configs, each device's configs (published once
/// per new entity, all again when Home Assistant says `online`), and their removal. Which
/// states to hold back after a new config is the gateway's part (``DeviceStates/hold(_:until:)``).
/// Loop-confined; inert when `homeassistant.enabled` is false.
final class HomeAssistantPublisher {
    private let context: CoreContext
    /// The config builder, nil when discovery is off.
    let discovery: HomeAssistantDiscovery?
    /// Config topics published per device (emptied on removal).
    private var topics: [[String]] = []
    /// When every config is republished (after Home Assistant said `online`).
    private var republishAt: Double?

    init(context: CoreContext, version: String) {
        self.context = context
        let config = context.config
        discovery =
            config.homeAssistant.enabled
            ? HomeAssistantDiscovery(
                settings: config.homeAssistant, base: context.base, version: version,
                availabilityEnabled: config.availability.enabled, bridge: config.bridgeTopic,
                fleetGateway: config.fleet.enabled ? config.gatewayID : nil)
            : nil
    }

    var enabled: Bool { discovery != nil }

    func added(_ id: DeviceID) {
        if id.index >= topics.count { topics.append(contentsOf: repeatElement([], count: id.index + 1 - topics.count)) }
        topics[id.index] = []
    }

    /// The bridge's configs: always first, because device configs name the bridge in `via_device`.
    func publishBridge() {
        guard let discovery else { return }
        for config in discovery.bridgeConfigs() {
            context.output.publish(config.topic, json: config.payload, retain: true, kind: .republished)
        }
    }

    /// Publishes the device's configs — only those not published yet, unless `all`; true when
    /// a config was new.
    func publish(_ id: DeviceID, _ device: HomeAssistantDiscovery.Device, all: Bool) -> Bool {
        guard let discovery else { return false }
        var fresh = false
        for config in discovery.deviceConfigs(device) where all || !topics[id.index].contains(config.topic) {
            if !topics[id.index].contains(config.topic) {
                topics[id.index].append(config.topic)
                fresh = true
            }
            context.output.publish(config.topic, json: config.payload, retain: true, kind: .republished)
        }
        return fresh
    }

    /// Empty retained payloads on every config topic of the device: Home Assistant removes the
    /// entities.
    func removed(_ id: DeviceID) {
        for topic in topics[id.index] { context.output.publish(topic, [], retain: true) }
        topics[id.index] = []
    }

    /// `homeassistant/status`: `online` (Home Assistant started) asks for every config again
    /// after a random delay of up to `homeassistant.republish_delay`.
    func status(_ message: MQTTInboundMessage) {
        let text = String(decoding: message.payload, as: UTF8.self).trimmingSpaces()
        guard text == "online", enabled else { return }
        let delay = context.config.homeAssistant.republishDelay
        let due = context.clock.now() + (delay > 0 ? Double.random(in: 0...delay) : 0)
        if republishAt.map({ $0 > due }) ?? true { republishAt = due }
        context.log(.info, "Home Assistant is online: republishing discovery")
        context.due(at: due)
    }

    /// Whether the republish asked for by ``status(_:)`` is due at `now` (it is then taken).
    func republishDue(now: Double) -> Bool {
        guard let due = republishAt, now >= due else { return false }
        republishAt = nil
        return true
    }

    /// The republish that ``status(_:)`` asked for was done (or superseded).
    func republished() { republishAt = nil }

    var nextDeadline: Double? { republishAt }
}
