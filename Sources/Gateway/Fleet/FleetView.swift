/// What one gateway knows of its fleet, and its ownership decisions (docs/fleet.md, "Ownership").
/// Pure: fed with this gateway's sightings, the fleet messages of the others and the time; it
/// answers who may publish a device and what to announce. ``Fleet`` wires it to the core.
///
/// Ownership changes break before they make: a gateway that should take a device over first
/// *claims* it (announced), the owner releases it when it sees a better claimant (announced,
/// with the content key of the last reading it published), and only then does the claimant own
/// it. A device's readings are therefore published by at most one gateway at a time (while the
/// gateways see each other's messages), and the new owner skips the reading the old one published
/// last. An owner whose messages stop for `lease` (or whose will says offline) has lapsed: its
/// devices go to the best remaining gateway at once.
package struct FleetView {
    package struct Settings: Sendable {
        package var me: String
        package var hysteresis: Double
        package var handoverAfter: Double
        package var lease: Double

        package init(me: String, hysteresis: Double, handoverAfter: Double, lease: Double) {
            self.me = me
            self.hysteresis = hysteresis
            self.handoverAfter = handoverAfter
            self.lease = lease
        }
    }

    /// What a gateway says of a device.
    package enum Claim: Int, Sendable {
        case none = 0
        case owner = 1
        case claiming = 2
    }

    /// One device in one gateway's message.
    package struct Sighting: Sendable, Equatable {
        package var address: UInt64
        /// Smoothed RSSI (dBm); nil when the gateway does not hear the device (an owner holding a
        /// link to it, which stops advertising).
        package var rssi: Double?
        package var claim: Claim
        /// The content key of the last reading this gateway published for the device.
        package var key: UInt64?
        /// The commands for the device this gateway ran in the last ``ranWindow`` (their hashes):
        /// a gateway taking the device over does not run them again.
        package var ran: [UInt64] = []
    }

    /// A gateway's message: its sightings, every `lease / 5`.
    package struct Message: Sendable, Equatable {
        package var gateway: String
        package var online: Bool
        package var sightings: [Sighting]
    }

    /// A device's preferred gateway (`devices[].prefer_gateway`) and the floor above which its
    /// hearing counts (`prefer_floor_dbm`): every gateway knows it from the same rules.
    package struct Preference: Sendable, Equatable {
        package var gateway: String
        package var floor: Double

        package init(gateway: String, floor: Double) {
            self.gateway = gateway
            self.floor = floor
        }
    }

    /// One gateway in a decision: its smoothed RSSI, its name, and whether it is the device's
    /// preferred gateway hearing it above the floor (it ranks above every other then).
    private typealias Rank = (rssi: Double?, name: String, pinned: Bool)

    private struct Peer {
        var lastMessage: Double
        var sightings: [UInt64: Sighting]
    }

    package enum Role: Equatable, Sendable {
        case none
        case claiming(since: Double)
        case owner
    }

    package struct Device {
        var rssi: Double?
        var heardAt = -Double.infinity
        /// The smoothed time between two reports of the device here (nil: heard once).
        var interval: Double?
        /// A link to the device is up (it may not advertise): it counts as heard.
        package var linked = false
        /// The device's preferred gateway, from its rule (nil: none).
        var preference: Preference?
        package var role = Role.none
        /// Since when another gateway's owner has been worse than this one by the hysteresis.
        var betterSince: Double?
        /// The key of the last reading published here.
        var publishedKey: UInt64?
        /// The key of the last reading decoded here.
        var heardKey: UInt64?
        /// Keys not to publish again right after taking over: the previous owner's last (and, when
        /// it lapsed, the last one heard here), until ``handoverUntil``.
        var handoverKeys: [UInt64] = []
        var handoverUntil = -Double.infinity
        /// Commands run here recently (hash, when).
        var ran: [(hash: UInt64, at: Double)] = []
        /// Commands received while claiming the device (hash, when), run once it is owned unless
        /// the previous owner ran them.
        var held: [(hash: UInt64, at: Double)] = []
        /// What the previous owner said it ran (its release, or its last message when it lapsed).
        var previousRan: [UInt64] = []
        /// The owner released the device while this gateway claimed it: the claim needs no settling.
        var releasedToMe = false

        /// The hashes of the commands held.
        var heldHashes: [UInt64] { held.map(\.hash) }
    }

    /// A change of this gateway's role for a device, for the core to act on.
    package enum Change: Equatable, Sendable {
        case gained(UInt64)
        case lost(UInt64)
    }

    package let settings: Settings
    /// Nothing is claimed before this (monotonic seconds): a gateway that starts first listens
    /// for one lease to learn the owners.
    let quietUntil: Double
    private var peers: [String: Peer] = [:]
    package private(set) var devices: [UInt64: Device] = [:]
    /// Ownership changes so far (gained), for `bridge/health`.
    package private(set) var handovers = 0
    /// Why each change of the last ``evaluate(now:)`` happened (the page's fleet view).
    package private(set) var reasons: [(address: UInt64, reason: String)] = []

    /// How long a command run here is announced (seconds).
    package static let ranWindow = 10.0
    /// At most this many commands per device are announced, or held while claiming.
    package static let maxCommands = 16

    /// At most this many other gateways are followed (a message from one more is refused): a bound
    /// on what messages under the fleet topic can make a gateway remember.
    package static let maxPeers = 64

    /// RSSI smoothing: exponential, this weight for each new sample.
    static let smoothing = 0.25
    /// How long a claim stands before it becomes ownership when nobody owns the device (seconds).
    static let claimSettle = 1.0
    /// How long after taking a device over the previous owner's last reading is not published
    /// again (seconds): the window of the content check for formats without a counter.
    static let handoverWindow = 60.0

    package init(settings: Settings, now: Double) {
        self.settings = settings
        quietUntil = now + settings.lease
    }

    package var peerCount: Int { peers.count }

    /// The other gateways: when each was last heard and what it said of each device.
    package var peerSightings: [(gateway: String, lastMessage: Double, sightings: [UInt64: Sighting])] {
        peers.map { ($0.key, $0.value.lastMessage, $0.value.sightings) }.sorted { $0.gateway < $1.gateway }
    }
    package var ownedCount: Int { devices.values.count { $0.role == .owner } }

    package func role(_ address: UInt64) -> Role { devices[address]?.role ?? .none }

    /// A presence identity's key in the fleet (docs/fleet.md, "Presence"): FNV-1a (64 bits) of its
    /// name with the top bit set, so that it is never a device's address (48 bits) and every
    /// gateway computes the same key from the same name.
    package static func identityKey(_ name: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in "presence/\(name)".utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return hash | (1 << 63)
    }

    /// Whether a key is a presence identity's (else a device's address).
    package static func isIdentity(_ key: UInt64) -> Bool { key & (1 << 63) != 0 }

    /// This gateway's claims: the devices it owns or claims.
    package var claims: [UInt64: Claim] {
        var claims: [UInt64: Claim] = [:]
        for (address, device) in devices {
            switch device.role {
            case .owner: claims[address] = .owner
            case .claiming: claims[address] = .claiming
            case .none: break
            }
        }
        return claims
    }

    // MARK: Inputs

    /// This gateway heard the device (an advertisement; `rssi` nil when the report had none).
    package mutating func heard(_ address: UInt64, rssi: Int?, now: Double, preference: Preference? = nil) {
        var device = devices[address] ?? Device()
        device.preference = preference
        if let rssi {
            let sample = Double(rssi)
            device.rssi = device.rssi.map { $0 + Self.smoothing * (sample - $0) } ?? sample
        }
        let gap = now - device.heardAt
        if gap.isFinite, gap >= 0.02 {
            // A BlueZ report per advertisement (or per scan window): the gaps give the interval.
            device.interval = device.interval.map { $0 + Self.smoothing * (min(gap, settings.lease) - $0) } ?? gap
        }
        device.heardAt = now
        devices[address] = device
    }

    /// A link to the device came up or went down.
    package mutating func linked(_ address: UInt64, _ up: Bool, now: Double, preference: Preference? = nil) {
        var device = devices[address] ?? Device()
        if let preference { device.preference = preference }
        device.linked = up
        device.heardAt = now
        devices[address] = device
    }

    /// The content key of a reading decoded here.
    package mutating func decoded(_ address: UInt64, key: UInt64) {
        devices[address]?.heardKey = key
    }

    /// Whether this gateway publishes a reading with this key now: it owns the device, and the
    /// key is not the one the previous owner published last. Records it as published.
    package mutating func publishes(_ address: UInt64, key: UInt64?, now: Double) -> Bool {
        guard var device = devices[address], device.role == .owner else { return false }
        if let key {
            if now <= device.handoverUntil, device.handoverKeys.contains(key) { return false }
            device.handoverKeys = []
            device.publishedKey = key
        }
        devices[address] = device
        return true
    }

    /// A command for the device ran here (its hash, ``commandHash(topic:payload:)``).
    package mutating func ran(_ address: UInt64, hash: UInt64, now: Double) {
        guard var device = devices[address] else { return }
        device.ran.removeAll { now - $0.at > Self.ranWindow }
        if device.ran.count >= Self.maxCommands { device.ran.removeFirst() }
        device.ran.append((hash, now))
        devices[address] = device
    }

    /// A command for a device this gateway does not own: held (true) while this gateway claims
    /// it — the owner may be letting go right now — to run once the claim succeeds, unless the
    /// owner says it ran it. False: not this gateway's; the owner runs it.
    package mutating func hold(_ address: UInt64, hash: UInt64, now: Double) -> Bool {
        guard var device = devices[address], case .claiming = device.role else { return false }
        device.held.removeAll { now - $0.at > settings.lease }
        guard device.held.count < Self.maxCommands else { return false }
        device.held.append((hash, now))
        devices[address] = device
        return true
    }

    /// The held commands to run now that the device is owned here (those the previous owner did
    /// not run), in the order they arrived; the rest are forgotten.
    package mutating func takeHeld(_ address: UInt64, now: Double) -> [UInt64] {
        guard var device = devices[address] else { return [] }
        defer {
            device.held = []
            devices[address] = device
        }
        guard device.role == .owner else { return [] }
        return device.held.filter { now - $0.at <= settings.lease && !device.previousRan.contains($0.hash) }.map(\.hash)
    }

    /// The identity of a command across gateways: its topic and payload (FNV-1a, 64 bits). Two
    /// identical commands within ``ranWindow`` count as one at a handover; a `transaction` in
    /// the payload tells them apart.
    package static func commandHash(topic: String, payload: [UInt8]) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in topic.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        hash ^= 0xFF
        hash = hash &* 0x0000_0100_0000_01b3
        for byte in payload {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return hash
    }

    /// Another gateway's message; false when it is refused (one gateway more than ``maxPeers``).
    @discardableResult
    package mutating func received(_ message: Message, now: Double) -> Bool {
        guard message.gateway != settings.me else { return true }
        guard message.online else {
            dropPeer(message.gateway)
            return true
        }
        guard peers[message.gateway] != nil || peers.count < Self.maxPeers else { return false }
        var sightings: [UInt64: Sighting] = [:]
        sightings.reserveCapacity(message.sightings.count)
        for sighting in message.sightings { sightings[sighting.address] = sighting }
        // A device the gateway owned and now releases: remember its last key for the claimant.
        if let previous = peers[message.gateway] {
            for (address, old) in previous.sightings where old.claim == .owner {
                guard sightings[address]?.claim != .owner, devices[address] != nil else { continue }
                if let key = sightings[address]?.key ?? old.key { devices[address]?.handoverKeys = [key] }
                devices[address]?.previousRan = sightings[address]?.ran ?? old.ran
                if case .claiming = devices[address]?.role { devices[address]?.releasedToMe = true }
            }
        }
        peers[message.gateway] = Peer(lastMessage: now, sightings: sightings)
        return true
    }

    /// A gateway's will (or its `bridge/state` offline): it is gone.
    package mutating func wentOffline(_ gateway: String) {
        guard gateway != settings.me else { return }
        dropPeer(gateway)
    }

    /// A gateway is gone (lapsed, its will, its orderly stop): its claims end; the last key it
    /// announced for each device it owned — and the last one heard here, which it may have
    /// published after its last message — stay with the device, so the next owner does not
    /// publish them again.
    private mutating func dropPeer(_ name: String) {
        guard let peer = peers.removeValue(forKey: name) else { return }
        for (address, sighting) in peer.sightings where sighting.claim == .owner {
            guard devices[address] != nil else { continue }
            devices[address]?.previousRan = sighting.ran
            var keys: [UInt64] = []
            if let key = sighting.key { keys.append(key) }
            if let heard = devices[address]?.heardKey, !keys.contains(heard) { keys.append(heard) }
            devices[address]?.handoverKeys = keys
        }
    }

    // MARK: Decisions

    /// Re-decides every device at `now`; returns the changes of this gateway's role.
    package mutating func evaluate(now: Double) -> [Change] {
        reasons = []
        // Lapsed gateways first.
        for (name, peer) in peers where now - peer.lastMessage > settings.lease { dropPeer(name) }
        var changes: [Change] = []
        for address in devices.keys {
            if let change = decide(address, now: now) { changes.append(change) }
        }
        // Forget devices nobody has said anything of for a while.
        devices = devices.filter { address, device in
            device.role != .none || device.linked || now - device.heardAt <= 4 * settings.lease
                || peers.values.contains { $0.sightings[address] != nil }
        }
        return changes
    }

    /// The (pinned, RSSI, name) order: the device's preferred gateway hearing it above the floor
    /// wins, then a higher RSSI, then the smaller name. Unheard ranks last.
    private static func better(_ a: Rank, than b: Rank) -> Bool {
        if a.pinned != b.pinned { return a.pinned }
        let left = a.rssi ?? -Double.infinity
        let right = b.rssi ?? -Double.infinity
        return left != right ? left > right : a.name < b.name
    }

    /// Whether a gateway's announced RSSI makes it the device's pinned gateway: it is the
    /// preferred one, and it hears the device (an RSSI announced) at or above the floor.
    private static func pinned(_ name: String, rssi: Double?, _ preference: Preference?) -> Bool {
        guard let preference, preference.gateway == name, let rssi else { return false }
        return rssi >= preference.floor
    }

    /// Whether this gateway still hears the device: it has a link to it, or heard it within
    /// three of its advertising intervals (at least 3 s, at most a lease; a lease until the
    /// interval is known). A device that walked out of the owner's range is released within a few
    /// of its intervals instead of a whole lease, and a device that advertises rarely is not
    /// dropped between two advertisements.
    private func hears(_ device: Device, now: Double) -> Bool {
        guard !device.linked else { return true }
        let limit = device.interval.map { min(settings.lease, max(3, 3 * $0)) } ?? settings.lease
        return now - device.heardAt <= limit
    }

    private mutating func decide(_ address: UInt64, now: Double) -> Change? {
        guard var device = devices[address] else { return nil }
        defer { devices[address] = device }
        let hearing = hears(device, now: now)
        let preference = device.preference
        // This gateway is pinned while it hears the device above the floor; a link counts as that.
        let mine: Rank = (
            device.linked ? (device.rssi ?? 0) : device.rssi, settings.me,
            preference?.gateway == settings.me && hearing
                && (device.linked || Self.pinned(settings.me, rssi: device.rssi, preference))
        )
        var owners: [Rank] = []
        var claimants: [Rank] = []
        var bestOther: Rank?
        for (name, peer) in peers {
            guard let sighting = peer.sightings[address] else { continue }
            let entry: Rank = (sighting.rssi, name, Self.pinned(name, rssi: sighting.rssi, preference))
            switch sighting.claim {
            case .owner: owners.append(entry)
            case .claiming: claimants.append(entry)
            case .none: break
            }
            if bestOther.map({ Self.better(entry, than: $0) }) ?? true { bestOther = entry }
        }
        switch device.role {
        case .owner:
            // Two owners (a partition healed, or a simultaneous claim): the better one stays.
            let outranked = owners.contains { Self.better($0, than: mine) }
            // A claimant better than this gateway: it waited out the hysteresis; let it have it.
            let challenged = claimants.contains { Self.better($0, than: mine) }
            let gone = !hearing && (bestOther != nil)
            if outranked || challenged || gone {
                let preferred = (owners + claimants).contains { $0.pinned }
                reasons.append(
                    (
                        address,
                        outranked
                            ? (preferred
                                ? "its preferred gateway owned it too"
                                : "another gateway owned it too and hears it better")
                            : challenged
                                ? (preferred
                                    ? "its preferred gateway hears it again and claimed it"
                                    : "a gateway that hears it better claimed it")
                                : "this gateway no longer hears it"
                    ))
                device.role = .none
                device.betterSince = nil
                return .lost(address)
            }
            return nil
        case .claiming(let since):
            if owners.isEmpty {
                // Another claimant better than this one: it goes first.
                if claimants.contains(where: { Self.better($0, than: mine) }) || !hearing {
                    device.role = .none
                    device.held = []
                    return nil
                }
                // The claim stands for a moment first, so that a simultaneous claim of another
                // gateway is seen before either publishes.
                guard now - since >= Self.claimSettle || device.releasedToMe else { return nil }
                reasons.append(
                    (
                        address,
                        device.releasedToMe
                            ? (mine.pinned
                                ? "its owner released it to this gateway, its preferred one"
                                : "its owner released it to this gateway")
                            : mine.pinned
                                ? "this is its preferred gateway and nobody owned it"
                                : "nobody owned it (or its owner went away)"
                    ))
                device.releasedToMe = false
                device.role = .owner
                device.handoverUntil = now + Self.handoverWindow
                handovers += 1
                return .gained(address)
            }
            // The owner did not let go within a lease: give up, start counting again.
            if now - since > settings.lease {
                device.role = .none
                device.betterSince = nil
                device.held = []
            }
            return nil
        case .none:
            guard hearing, now >= quietUntil else { return nil }
            if let owner = owners.max(by: { Self.better($1, than: $0) }) {
                // The preferred gateway takes it back from another owner when it hears it above
                // the floor by the hysteresis (so a level around the floor does not move it back
                // and forth), for handover_after. Nobody takes it from the pinned preferred
                // gateway; while the preferred one claims it, nobody else does. Otherwise:
                // better than the owner by the hysteresis, for handover_after, claims.
                let challenges: Bool
                if owner.pinned || claimants.contains(where: { $0.pinned }) {
                    challenges = false
                } else if mine.pinned, let preference {
                    challenges =
                        device.linked || (mine.rssi ?? -Double.infinity) >= preference.floor + settings.hysteresis
                } else if let rssi = mine.rssi, let theirs = owner.rssi {
                    challenges = rssi >= theirs + settings.hysteresis
                } else {
                    challenges = false
                }
                guard challenges else {
                    device.betterSince = nil
                    return nil
                }
                let since = device.betterSince ?? now
                device.betterSince = since
                if now - since >= settings.handoverAfter {
                    device.role = .claiming(since: now)
                    device.releasedToMe = false
                    device.betterSince = nil
                    device.previousRan = []
                }
                return nil
            }
            // Nobody owns it: the best gateway that hears it claims it.
            if claimants.contains(where: { Self.better($0, than: mine) }) { return nil }
            if let other = bestOther, Self.better(other, than: mine) { return nil }
            device.role = .claiming(since: now)
            device.releasedToMe = false
            return nil
        }
    }

    /// The next moment a decision is due by itself (a peer's lease running out, a claim settling,
    /// a better gateway's `handover_after` passing): the caller re-decides then, not only at its
    /// once-a-second tick.
    package var nextDecision: Double {
        var next = Double.infinity
        for peer in peers.values { next = min(next, peer.lastMessage + settings.lease + 0.001) }
        for device in devices.values {
            if case .claiming(let since) = device.role { next = min(next, since + Self.claimSettle) }
            if let since = device.betterSince { next = min(next, since + settings.handoverAfter) }
        }
        return next
    }

    // MARK: Output

    /// This gateway's message: every device it hears, claims or owns.
    package func message(now: Double, online: Bool = true) -> Message {
        var sightings: [Sighting] = []
        guard online else { return Message(gateway: settings.me, online: false, sightings: []) }
        for (address, device) in devices {
            let claim: Claim
            switch device.role {
            case .owner: claim = .owner
            case .claiming: claim = .claiming
            case .none: claim = .none
            }
            let ran = device.ran.filter { now - $0.at <= Self.ranWindow }.map(\.hash)
            guard claim != .none || hears(device, now: now) || !ran.isEmpty else { continue }
            sightings.append(
                Sighting(
                    address: address, rssi: hears(device, now: now) ? device.rssi.map { $0.rounded() } : nil,
                    claim: claim, key: device.publishedKey, ran: ran))
        }
        sightings.sort { $0.address < $1.address }
        return Message(gateway: settings.me, online: true, sightings: sightings)
    }
}
