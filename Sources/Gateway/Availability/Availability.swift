/// `<base>/<device>/availability` of every device (retained, published only when it changes):
/// connected devices follow their link; advertisement-only devices are online while they
/// advertise and offline once overdue by their learned interval (``AvailabilityTracker``).
/// Loop-confined.
final class Availability {
    private let context: CoreContext
    /// In a fleet: a device another gateway owns gets no availability from this one.
    private let fleet: Fleet?
    private var trackers: [AvailabilityTracker] = []

    init(context: CoreContext, fleet: Fleet?) {
        self.context = context
        self.fleet = fleet
    }

    private var settings: AvailabilitySettings { context.config.availability }

    func added(_ id: DeviceID) {
        if id.index >= trackers.count {
            trackers.append(contentsOf: repeatElement(AvailabilityTracker(), count: id.index + 1 - trackers.count))
        }
        trackers[id.index] = AvailabilityTracker()
    }

    /// What was last published for the device: nil before the first publish.
    func published(_ id: DeviceID) -> Bool? { trackers[id.index].published }

    /// An advertisement of an advertisement-only device at `now`: online now if it was not.
    func advertised(_ id: DeviceID, _ device: DeviceRecord, rule: DeviceRule, now: Double) {
        trackers[id.index].advertisement(at: now)
        guard trackers[id.index].published != true else { return }
        publish(id, device, online: true)
        if settings.enabled,
            let deadline = trackers[id.index].deadline(settings: settings, fixedTimeout: rule.availabilityTimeout)
        {
            context.due(at: deadline)
        }
    }

    /// Publishes the device's availability when it changes (with availability on).
    func publish(_ id: DeviceID, _ device: DeviceRecord, online: Bool) {
        guard settings.enabled, trackers[id.index].published != online, fleet.owns(device.address) else { return }
        trackers[id.index].published = online
        let payload = Array((online ? #"{"state":"online"}"# : #"{"state":"offline"}"#).utf8)
        context.output.publish(device.stateTopic + "/availability", owned: payload, retain: true, kind: .republished)
        context.deviceEvents?.noteAvailability(id.index, payload)
    }

    /// The device went to another gateway of the fleet (or came to this one): what was
    /// published is forgotten (not retracted), so the next change publishes again.
    func forget(_ id: DeviceID) {
        trackers[id.index].published = nil
    }

    /// After an MQTT reconnect: what was published goes out again (the broker may have lost it).
    func republish(_ id: DeviceID, _ device: DeviceRecord) {
        guard let online = trackers[id.index].published else { return }
        trackers[id.index].published = nil
        publish(id, device, online: online)
    }

    /// An advertisement-only device overdue at `now` goes offline; true when it did (the
    /// gateway says `device_unavailable`).
    func tick(_ id: DeviceID, _ device: DeviceRecord, rule: DeviceRule, now: Double) -> Bool {
        guard let deadline = deadline(id, rule: rule), now >= deadline else { return false }
        publish(id, device, online: false)
        return true
    }

    /// When an advertisement-only device shown online goes offline if nothing arrives.
    func nextDeadline(_ id: DeviceID, rule: DeviceRule) -> Double? {
        deadline(id, rule: rule)
    }

    private func deadline(_ id: DeviceID, rule: DeviceRule) -> Double? {
        guard !rule.connect, settings.enabled, trackers[id.index].published == true else { return nil }
        return trackers[id.index].deadline(settings: settings, fixedTimeout: rule.availabilityTimeout)
    }

    /// The device is removed: its retained availability is cleared (an empty retained payload).
    func removed(_ id: DeviceID, _ device: DeviceRecord) {
        if trackers[id.index].published != nil {
            context.output.publish(device.stateTopic + "/availability", [], retain: true)
            context.deviceEvents?.noteAvailability(id.index, [])
        }
        trackers[id.index] = AvailabilityTracker()
    }
}
