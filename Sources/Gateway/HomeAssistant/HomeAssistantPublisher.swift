import Bluetooth
import JSON

/// Home Assistant MQTT discovery: the bridge's configs, each device's configs (published once
/// per new entity, all again when Home Assistant says `online`), and their removal. Which
/// states to hold back after a new config is the gateway's part (``DeviceStates/hold(_:until:)``).
/// Loop-confined; inert when `homeassistant.enabled` is false.
final class HomeAssistantPublisher {
    let context: CoreContext
    /// The config builder, nil when discovery is off.
    let discovery: HomeAssistantDiscovery?
    /// Config topics published per device (emptied on removal).
    private var topics: [[String]] = []
    /// When every config is republished (after Home Assistant said `online`).
    private var republishAt: Double?
    /// A republish of every device's configs in progress (``startSweep(_:hold:)``): the devices
    /// still to go, in registration order, and whether their states are held.
    private var sweep: (addresses: [BluetoothAddress], next: Int, hold: Bool)?
    /// When the sweep's next step is due (nil: none waiting).
    private var sweepAt: Double?

    /// Devices whose configs one step of a sweep publishes, at most.
    static let sweepStep = 32
    /// Time between the steps of a sweep.
    static let sweepInterval = 0.02

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

    /// Whether a message on `topic` is Home Assistant's status (``status(_:)``): with discovery
    /// on, `homeassistant.status_topic`.
    func isStatusTopic(_ topic: String) -> Bool {
        enabled && topic == context.config.homeAssistant.statusTopic
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

    // MARK: Republishing every config, paced

    /// Starts republishing every config of `addresses` (replacing a sweep in progress). A
    /// registry of 1,000 devices has some 7,500 configs of ~700 bytes: handed to the MQTT client
    /// at once they would take ~8 MB for as long as the broker needs to take them, and could
    /// overflow `mqtt.max_queued`. The gateway publishes them in steps instead (``sweepStep``
    /// devices every ``sweepInterval``, none while the client's backlog is at ``sweepWindow``).
    func startSweep(_ addresses: [BluetoothAddress], hold: Bool) {
        sweep = addresses.isEmpty ? nil : (addresses, 0, hold)
        sweepAt = nil
    }

    /// The MQTT connection was lost: configs published now would be dropped, and the reconnect
    /// starts a new sweep.
    func cancelSweep() {
        sweep = nil
        sweepAt = nil
    }

    /// QoS 1/2 messages the MQTT client may hold for a step to go on: a quarter of
    /// `mqtt.max_queued` (at least 64, at most 1,000); readings keep the rest.
    var sweepWindow: Int { max(64, min(1_000, (context.output.mqtt.backlogLimit ?? 4_000) / 4)) }

    /// The next device of the sweep whose configs go out now, and whether to hold its state; nil
    /// when the sweep is done or the MQTT client holds ``sweepWindow`` messages.
    func nextSweepDevice() -> (address: BluetoothAddress, hold: Bool)? {
        guard let current = sweep, current.next < current.addresses.count,
            context.output.mqtt.backlog < sweepWindow
        else { return nil }
        sweep?.next += 1
        return (current.addresses[current.next], current.hold)
    }

    /// A step ended: the next one ``sweepInterval`` from `now`, or the sweep is over.
    func sweepStepDone(now: Double) {
        guard let current = sweep, current.next < current.addresses.count else { return cancelSweep() }
        sweepAt = now + Self.sweepInterval
        context.due(at: now + Self.sweepInterval)
    }

    /// Whether the sweep's next step is due at `now` (it is then taken).
    func sweepDue(now: Double) -> Bool {
        guard let due = sweepAt, now >= due else { return false }
        sweepAt = nil
        return true
    }

    var nextDeadline: Double? {
        switch (republishAt, sweepAt) {
        case (let republish?, let step?): min(republish, step)
        case (let republish, let step): republish ?? step
        }
    }
}
