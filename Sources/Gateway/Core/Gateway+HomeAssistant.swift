import Bluetooth
import JSON

extension Gateway {
    /// The discovery builder, nil when `homeassistant.enabled` is false.
    var discovery: HomeAssistantDiscovery? {
        guard config.homeAssistant.enabled else { return nil }
        return HomeAssistantDiscovery(settings: config.homeAssistant, base: base, version: version,
                                      availabilityEnabled: config.availability.enabled)
    }

    /// The bridge's configs: always first, because device configs name the bridge in `via_device`.
    func publishBridgeDiscovery() {
        guard let discovery else { return }
        for config in discovery.bridgeConfigs() { publish(config.topic, json: config.payload, retain: true, kind: .republished) }
    }

    /// Publishes the device's configs — only those not published yet, unless `all` — and holds
    /// its state back for `homeassistant.state_delay` when a config was new or, with `hold`,
    /// when all were republished. True when a config was new.
    @discardableResult
    func publishDiscovery(_ index: Int, all: Bool = false, hold: Bool = true) -> Bool {
        guard let discovery else { return false }
        let device = devices[index]
        let configs = discovery.deviceConfigs(HomeAssistantDiscovery.Device(
            address: device.address, name: device.name, localName: device.localName, format: format(index),
            attributes: device.attributes.map { attributeTable.reading($0) }, commands: rule(index).commands,
            hasRSSI: device.rssi != nil))
        var fresh = false
        for config in configs where all || !device.discoveryTopics.contains(config.topic) {
            if !devices[index].discoveryTopics.contains(config.topic) {
                devices[index].discoveryTopics.append(config.topic)
                fresh = true
            }
            publish(config.topic, json: config.payload, retain: true, kind: .republished)
        }
        if fresh || (all && hold), !devices[index].attributes.isEmpty { holdState(index) }
        return fresh
    }

    /// Empty retained payloads on every config topic of the device: HA removes the entities.
    func removeDiscovery(_ index: Int) {
        for topic in devices[index].discoveryTopics { publish(topic, [], retain: true) }
        devices[index].discoveryTopics = []
    }

    /// `homeassistant/status`: `online` (HA started) republishes every config after a random
    /// delay of up to `homeassistant.republish_delay`, then every state `state_delay` later.
    func homeAssistantStatus(_ message: MQTTInboundMessage) {
        let text = String(decoding: message.payload, as: UTF8.self).trimmingSpaces()
        guard text == "online", config.homeAssistant.enabled else { return }
        let delay = config.homeAssistant.republishDelay
        let due = clock.now() + (delay > 0 ? Double.random(in: 0...delay) : 0)
        if discoveryRepublishAt.map({ $0 > due }) ?? true { discoveryRepublishAt = due }
        log(.info, "Home Assistant is online: republishing discovery")
        armTimer(due)
    }

    /// Every config again (bridge first), then, with `holdingStates`, every state after
    /// `state_delay` (for Home Assistant starting: it takes a state only after the config).
    func republishDiscovery(holdingStates: Bool = true) {
        discoveryRepublishAt = nil
        guard config.homeAssistant.enabled else { return }
        publishBridgeDiscovery()
        for index in devices.indices { publishDiscovery(index, all: true, hold: holdingStates) }
    }
}
