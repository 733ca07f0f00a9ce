extension Gateway {
    /// Most state messages one device keeps while its state is held; beyond it the oldest is
    /// dropped (counted as `dropped.rate_control`). A second of a 100 Hz sensor fits many times.
    static let maxHeldStates = 1024

    /// Holds the device's state until `homeassistant.state_delay` from now (HA drops a state
    /// that arrives within ~0.1 s of a new config). Readings meanwhile are kept, not merged
    /// away: ``releaseHeldStates(_:now:)`` publishes each of them, in order, when the hold ends.
    func holdState(_ index: Int) {
        let until = clock.now() + config.homeAssistant.stateDelay
        devices[index].stateHeldUntil = until
        armTimer(until)
    }

    /// Publishes one state message of the device now, or keeps it while the state is held,
    /// stamped with the time it would have gone out (its capture time if it ends up queued).
    func publishStateMessage(_ index: Int, topic: String, payload: [UInt8], retain: Bool, qos: Int) {
        guard devices[index].stateHeldUntil != nil else {
            publish(topic, payload, retain: retain, qos: qos)
            return
        }
        if devices[index].heldStates.count >= Self.maxHeldStates {
            devices[index].heldStates.removeFirst()
            counters.dropped.rateControl += 1
        }
        devices[index].heldStates.append(
            MQTTOutboundMessage(topic: topic, payload: Self.exactCopy(payload), qos: qos, retain: retain,
                                capturedAt: clock.wallMilliseconds()))
    }

    /// The hold ended: every state message kept meanwhile goes out in order (each payload has
    /// its reading's `last_seen`); when none came, the current state is published (what HA
    /// waits for after a new or republished config).
    func releaseHeldStates(_ index: Int, now: Double) {
        devices[index].stateHeldUntil = nil
        let held = devices[index].heldStates
        devices[index].heldStates = []
        guard !held.isEmpty else {
            publishState(index, now: now)
            return
        }
        for message in held {
            counters.published += 1
            if let outbox {
                // Queued now (broker away or a replay running), it keeps its capture time.
                outbox.publish(message, kind: .stored)
            } else {
                var live = message
                live.capturedAt = nil
                mqtt.publish(live)
            }
        }
    }
}
