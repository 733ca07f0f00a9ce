import Bluetooth
import JSON

/// What presence knows of one identity: its smoothed RSSI and distance, where and when it was
/// last heard, and whether it is home.
package struct PresenceTrack: Sendable, Equatable {
    package var smoother = RSSISmoother()
    /// The distance estimate of the smoothed RSSI (metres); nil before a report with an RSSI.
    package var distance: Double?
    /// The adapter (its index in `bluetooth.adapters`) of the last report.
    package var adapter: UInt8 = 0
    /// The address of the last report (a phone's current resolvable private address).
    package var address: BluetoothAddress?
    /// The RSSI at 1 m the distance was computed with (dBm); nil before a report with an RSSI.
    package var rssiAt1m: Double?
    /// The last report: monotonic seconds and wall milliseconds.
    package var lastSeen = 0.0
    package var lastSeenWall: Int64 = 0
    package var home = false
    /// When `<base>/presence/<name>` was last published (monotonic seconds).
    package var publishedAt = -Double.infinity

    package var rssi: Double? { smoother.value }
}

/// The identity resolver's counters, summed over the matchers made since the start (one is made
/// anew whenever the identities change).
struct ResolverCounts {
    var lookups = 0
    var hits = 0
    var tried = 0
    var resolved = 0
    var evicted = 0

    mutating func add(_ resolver: IdentityResolver) {
        lookups += resolver.lookups
        hits += resolver.hits
        tried += resolver.tried
        resolved += resolver.resolved
        evicted += resolver.evicted
    }
}

extension Presence {
    /// A report matched to an identity (``PresenceMatcher/identify(_:type:advertisement:)``) at
    /// `now`: its track is updated; the identity's name, and whether to publish now (it arrived,
    /// or ``publishInterval`` passed since the last message).
    func heard(
        _ match: PresenceMatcher.Match, address: BluetoothAddress, rssi: Int16?, adapter: UInt8, now: Double,
        wall: Int64
    ) -> (name: String, publish: Bool) {
        let identity = identities[match.identity]
        var track = tracks[identity.name] ?? PresenceTrack()
        if let rssi {
            let smoothed = track.smoother.add(Double(rssi), now: now)
            let reference = PathLoss.rssiAt1m(
                identity: identity.rssiAt1m, advertised: match.power, fallback: settings.rssiAt1m)
            track.distance = PathLoss.distance(rssi: smoothed, rssiAt1m: reference, absorption: settings.absorption)
            track.rssiAt1m = reference
        }
        track.adapter = adapter
        track.address = address
        track.lastSeen = now
        track.lastSeenWall = wall
        let arrived = !track.home
        track.home = true
        let publish = arrived || now - track.publishedAt >= Self.publishInterval
        if publish { track.publishedAt = now }
        tracks[identity.name] = track
        return (identity.name, publish)
    }

    /// The identities unheard for `away_after` at `now`: they are `not_home` from now on (their
    /// names, to publish). A removed run-time identity's track goes with it.
    func away(now: Double) -> [String] {
        var gone: [String] = []
        for (name, track) in tracks where track.home && now - track.lastSeen >= settings.awayAfter {
            gone.append(name)
        }
        for name in gone.sorted() {
            tracks[name]?.home = false
            tracks[name]?.publishedAt = now
        }
        let known = Set(identities.map(\.name))
        for name in tracks.keys where !known.contains(name) && tracks[name]?.home == false && !gone.contains(name) {
            tracks[name] = nil
        }
        return gone.sorted()
    }

    /// When the next identity goes `not_home` if nothing is heard of it (nil: none is home).
    var nextDeadline: Double? {
        var next = Double.infinity
        for track in tracks.values where track.home { next = min(next, track.lastSeen + settings.awayAfter) }
        return next.isFinite ? next : nil
    }

    /// The room of a report heard by `adapter` (its index in `adapters`): `adapter_rooms`' room of
    /// that adapter, else `room`, else `gateway` (the gateway's name).
    func room(adapter: UInt8, adapters: [String], gateway: String) -> String {
        let index = Int(adapter)
        if index < adapters.count, let room = settings.adapterRooms[adapters[index]] { return room }
        return settings.room ?? gateway
    }

    /// `<base>/presence/<name>`'s payload: `state` (`home`/`not_home`), `rssi` (smoothed, dBm,
    /// one decimal), `distance` (metres, two decimals), `room`, `last_seen` (ISO 8601 UTC);
    /// `rssi` and `distance` are null when not home.
    func payload(_ name: String, room: String) -> JSONValue? {
        guard let track = tracks[name] else { return nil }
        let rssi = track.home ? track.rssi.map { JSONValue.number(($0 * 10).rounded() / 10) } : nil
        let distance = track.home ? track.distance.map { JSONValue.number(($0 * 100).rounded() / 100) } : nil
        return .object([
            ("state", .string(track.home ? "home" : "not_home")),
            ("rssi", rssi ?? .null), ("distance", distance ?? .null), ("room", .string(room)),
            ("last_seen", .string(HealthReporter.isoText(track.lastSeenWall))),
        ])
    }

    /// `bridge/health`'s `presence`: the identities, how many are home, and the resolver's
    /// counters (addresses resolved to an identity, tried against every IRK without a match, and
    /// answered from the cache; the cache's size and what it dropped).
    func healthSection() -> JSONValue {
        var counts = earlier
        counts.add(matcher.resolver)
        func number(_ value: Int) -> JSONValue { .number(Double(value)) }
        return .object([
            ("identities", number(identities.count)),
            ("home", number(tracks.values.filter(\.home).count)),
            ("resolved", number(counts.resolved)),
            ("unresolved", number(counts.tried - counts.resolved)),
            ("cache_hits", number(counts.hits)),
            ("cached", number(matcher.resolver.cached)),
            ("evicted", number(counts.evicted)),
        ])
    }
}
