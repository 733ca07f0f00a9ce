import Bluetooth

extension Gateway {
    /// The names of the presence identities, config.json's then those set at run time; empty
    /// without a `presence` section.
    package var presenceIdentityNames: [String] { presence?.identities.map(\.name) ?? [] }

    /// The name of the presence identity that sent `discovery`, if any (nil without a `presence`
    /// section): what the presence output ties a report to.
    package func presenceIdentity(of discovery: BLEDiscovery) -> String? {
        guard let presence,
            let match = presence.matcher.identify(
                discovery.address, type: discovery.addressType, advertisement: discovery.advertisement)
        else { return nil }
        return presence.identities[match.identity].name
    }

    /// What presence knows of the identity named `name` (nil: not heard, or no `presence`).
    package func presenceTrack(_ name: String) -> PresenceTrack? { presence?.tracks[name] }

    /// One advertising report, with `presence` configured: matched against the identities, and
    /// the matched identity's track updated and published (``publishPresence(_:)``). True when the
    /// report came from a resolvable private address resolved to an identity: the core then
    /// keeps it out of the device registry (a rotation must never be a new device). A fixed
    /// address or a beacon that is an identity is a device as well when a rule matches it.
    func presenceHeard(_ presence: Presence, _ discovery: BLEDiscovery) -> Bool {
        guard
            let match = presence.matcher.identify(
                discovery.address, type: discovery.addressType, advertisement: discovery.advertisement)
        else { return false }
        let now = context.clock.now()
        let (name, publish) = presence.heard(
            match, address: discovery.address, rssi: discovery.advertisement.rssi, adapter: discovery.adapter, now: now,
            wall: context.clock.wallMilliseconds())
        fleet?.heardIdentity(name, rssi: discovery.advertisement.rssi, now: now)
        if publish {
            publishPresence(name)
            context.due(at: now + presence.settings.awayAfter)
        }
        if case .irk = presence.identities[match.identity].key { return true }
        return false
    }

    /// `<base>/presence/<name>`, retained (docs/config.md, "presence"); before an identity's
    /// first message, its Home Assistant configs; with `presence.espresense`, while it is home,
    /// `espresense/devices/<id>/<room>` as well. In a fleet only the gateway that owns the identity
    /// (hears it best) publishes `<base>/presence/<name>`; ESPresense's message comes from every
    /// gateway that hears it, each with its own room, as ESPresense's nodes do.
    func publishPresence(_ name: String) {
        guard let presence, let track = presence.tracks[name] else { return }
        let room = presence.room(
            adapter: track.adapter, adapters: context.config.bluetooth.adapters, gateway: context.config.gatewayID)
        if fleet.ownsIdentity(name), let payload = presence.payload(name, room: room) {
            if homeAssistant.enabled, !presence.discovered.contains(name) {
                presence.discovered.insert(name)
                homeAssistant.publishPresence(name)
            }
            context.output.publish(context.base + "/presence/" + name, json: payload, retain: true)
        }
        // ESPresense's own message (docs/config.md, "ESPresense"): a live reading, as a node sends
        // it (QoS 0, not retained), not queued while the broker is away: a late one would put the
        // device in a room it has left.
        if let message = presence.espresenseMessage(name, room: room) {
            context.output.publish(message.topic, json: message.payload, retain: false, qos: 0, kind: .snapshot)
        }
    }

    /// In a fleet, this gateway gained or lost the identity of `key` (docs/fleet.md, "Presence"):
    /// a gained one is published at once, with this gateway's room; a lost one goes quiet here.
    func presenceOwnerChanged(_ key: UInt64, gained: Bool) {
        guard let name = fleet?.identityName(key) else { return }
        context.log(
            .info, "fleet: presence \(name) \(gained ? "is published by this gateway now" : "went to another gateway")")
        if gained { publishPresence(name) }
    }

    /// The timer: identities unheard for `away_after` are published `not_home`.
    func presenceTick(now: Double) {
        guard let presence else { return }
        for name in presence.away(now: now) { publishPresence(name) }
    }
}
