/// A device's message as the web page's event stream sends it: the latest state
/// (`<base>/<device>`) or availability (`<base>/<device>/availability`) message of an interval.
public struct DeviceEvent: Sendable, Equatable {
    /// The device's topic level below the base topic (its name).
    public var device: String
    /// An availability message (else a state message).
    public var availability: Bool
    /// The message's payload as published (empty: the retained message was cleared).
    public var payload: [UInt8]

    public init(device: String, availability: Bool, payload: [UInt8]) {
        self.device = device
        self.availability = availability
        self.payload = payload
    }
}

/// The event stream's marks, kept by the core at the two places that publish a device's state
/// and availability, only while the web server asks (``Gateway/observeDeviceEvents(_:)``): the
/// interval's latest payload of each, by the device's slot, and the order their topics first
/// came. Noting one is an array store of the payload the core publishes anyway (no copy, no
/// hashing of the topic, no look at other messages: a thousand a second at full rate); the web
/// server's flush, once per interval, takes the events with the devices' names
/// (``take(names:)``). Holds at most two payloads per device slot (bounded by `max_devices`, as
/// the registry's slots are) and the events of devices removed during the interval.
/// Loop-confined.
final class DeviceEvents {
    /// Called when the interval's first event is noted (the web server arms its flush).
    private let first: () -> Void
    // Without the run-time exclusivity checks (~65 instructions an access, two a note): every
    // access below is on the loop thread and ends before any other code runs (``first`` is
    // called after `order`'s append), so none can overlap another.
    /// Per device slot: the interval's latest state payload (nil: none this interval).
    @exclusivity(unchecked) private var states: [[UInt8]?] = []
    /// Per device slot: the interval's latest availability payload (nil: none this interval).
    @exclusivity(unchecked) private var availabilities: [[UInt8]?] = []
    /// The interval's events in the order their topics first came: `slot << 1 | 1` for an
    /// availability, `slot << 1` for a state; -1 for one of ``gone``.
    @exclusivity(unchecked) private var order: [Int32] = []
    /// The events of devices removed during the interval, by their place in ``order``.
    private var gone: [Int: DeviceEvent] = [:]

    init(first: @escaping () -> Void) {
        self.first = first
    }

    var isEmpty: Bool { order.isEmpty }

    /// The device in `slot` published a state message with `payload`.
    @inline(never)
    func noteState(_ slot: Int, _ payload: [UInt8]) {
        if slot >= states.count { grow(slot) }
        if states[slot] == nil { append(Int32(truncatingIfNeeded: slot << 1)) }
        states[slot] = payload
    }

    /// The device in `slot` published an availability message with `payload`.
    @inline(never)
    func noteAvailability(_ slot: Int, _ payload: [UInt8]) {
        if slot >= states.count { grow(slot) }
        if availabilities[slot] == nil { append(Int32(truncatingIfNeeded: slot << 1 | 1)) }
        availabilities[slot] = payload
    }

    private func append(_ entry: Int32) {
        order.append(entry)
        if order.count == 1 { first() }
    }

    private func grow(_ slot: Int) {
        let count = slot + 1 - states.count
        states += repeatElement(nil, count: count)
        availabilities += repeatElement(nil, count: count)
    }

    /// The device in `slot`, named `device`, is removed (after its last messages): its events of
    /// the interval keep their place, with its name, and the slot is free for the next device.
    func removed(_ slot: Int, device: String) {
        guard slot < states.count, states[slot] != nil || availabilities[slot] != nil else { return }
        for (place, entry) in order.enumerated() where entry >= 0 && Int(entry >> 1) == slot {
            let availability = entry & 1 == 1
            let payload = (availability ? availabilities[slot] : states[slot]) ?? []
            gone[place] = DeviceEvent(device: device, availability: availability, payload: payload)
            order[place] = -1
        }
        states[slot] = nil
        availabilities[slot] = nil
    }

    /// The interval's events, each topic's latest, in the order the topics first came; empties
    /// the marks for the next interval. `names` gives a device slot's name (nil: the slot is
    /// free, its events are dropped).
    func take(names: (Int) -> String?) -> [DeviceEvent] {
        var events: [DeviceEvent] = []
        events.reserveCapacity(order.count)
        for (place, entry) in order.enumerated() {
            if entry < 0 {
                if let event = gone[place] { events.append(event) }
                continue
            }
            let slot = Int(entry >> 1)
            let availability = entry & 1 == 1
            let payload = (availability ? availabilities[slot].take() : states[slot].take()) ?? []
            guard let device = names(slot) else { continue }
            events.append(DeviceEvent(device: device, availability: availability, payload: payload))
        }
        order.removeAll(keepingCapacity: true)
        gone.removeAll()
        return events
    }
}
